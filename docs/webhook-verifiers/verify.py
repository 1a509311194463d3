import base64, hashlib, hmac, json, time

def verify_webhook(body, headers, secret, now=None):
    """Returns the event of a genuine, recent delivery; raises ValueError otherwise. body: the raw
    request body (bytes); headers: the request headers (lowercase names, or a case-insensitive
    mapping such as Flask's or Django's request.headers); secret: the endpoint's whsec_... secret;
    now: seconds since the epoch."""
    now = time.time() if now is None else now
    spec = 'sha256=' + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(spec.encode(), headers.get('x-svc-signature', '').encode()):
        raise ValueError('bad X-Svc-Signature')
    msg_id = headers.get('webhook-id', '')
    timestamp = headers.get('webhook-timestamp', '')
    if not (timestamp.isascii() and timestamp.isdigit()) or abs(now - int(timestamp)) > 5 * 60:
        raise ValueError('webhook-timestamp too old or too new')
    key = base64.b64decode(secret.removeprefix('whsec_'))
    mac = hmac.new(key, f'{msg_id}.{timestamp}.'.encode() + body, hashlib.sha256).digest()
    expected = ('v1,' + base64.b64encode(mac).decode()).encode()
    signatures = headers.get('webhook-signature', '').split(' ')
    if not any(hmac.compare_digest(expected, signature.encode()) for signature in signatures):
        raise ValueError('bad webhook-signature')
    return json.loads(body)
