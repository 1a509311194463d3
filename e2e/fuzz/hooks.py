"""Schemathesis hooks for the contract fuzz (e2e/contract-fuzz.test.ts).

The API's own string formats get strategies that draw valid values (the rules are in
control-plane/src/platform/identities.ts); invalid ones are still drawn by the coverage phase.
"""

import schemathesis
from hypothesis import strategies as st

schemathesis.openapi.format("external-id", st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._@:+-]{0,40}\Z"))
schemathesis.openapi.format("display-name", st.from_regex(r"\A[A-Za-z0-9](?:[A-Za-z0-9 .,'_-]{0,20}[A-Za-z0-9])?\Z"))
schemathesis.openapi.format("post-text", st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9 .,!?\n]{0,40}\Z"))

