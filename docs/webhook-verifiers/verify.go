package webhooks

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Event is what a delivery's body holds.
type Event struct {
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"created_at"`
	AppID     string          `json:"app_id"`
	Mode      string          `json:"mode"`
	Data      json.RawMessage `json:"data"`
}

// Header is what Verify reads the headers from: an http.Header (r.Header) is one.
type Header interface{ Get(name string) string }

// Verify returns the event of a genuine, recent delivery, or an error. body: the raw request body;
// secret: the endpoint's whsec_… secret; now: time.Now().
func Verify(body []byte, header Header, secret string, now time.Time) (*Event, error) {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	spec := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if !hmac.Equal([]byte(spec), []byte(header.Get("X-Svc-Signature"))) {
		return nil, errors.New("bad X-Svc-Signature")
	}
	id, timestamp := header.Get("Webhook-Id"), header.Get("Webhook-Timestamp")
	seconds, err := strconv.ParseUint(timestamp, 10, 63)
	if err != nil || now.Sub(time.Unix(int64(seconds), 0)).Abs() > 5*time.Minute {
		return nil, errors.New("webhook-timestamp too old or too new")
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return nil, errors.New("not a whsec_ secret")
	}
	mac = hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + timestamp + "."))
	mac.Write(body)
	expected := []byte("v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)))
	for _, signature := range strings.Fields(header.Get("Webhook-Signature")) {
		if hmac.Equal(expected, []byte(signature)) {
			var event Event
			if err := json.Unmarshal(body, &event); err != nil {
				return nil, err
			}
			return &event, nil
		}
	}
	return nil, errors.New("bad webhook-signature")
}
