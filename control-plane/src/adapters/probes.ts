/** A readiness probe: resolves when the dependency answers healthy, rejects otherwise. */
export type Probe = () => Promise<void>;

/** Probes one HTTP endpoint of a bundled server; any answer but the expected status is a failure. */
export function httpProbe(url: string, init: RequestInit = {}, expectedStatus = 200): Probe {
  return async () => {
    const response = await fetch(url, { ...init, signal: AbortSignal.timeout(2_000) });
    await response.body?.cancel();
    if (response.status !== expectedStatus) throw new Error(`answered ${response.status}`);
  };
}

export interface ServerEndpoints {
  /** ejabberd's API status command, as the control plane's account: up, and the credential works. */
  ejabberdStatus: Probe;
  livekitUrl: string;
  s3Endpoint: string;
}

/** How each bundled server says it is up: ejabberd's API status command, LiveKit's root, MinIO's ready check. */
export function serverProbes(endpoints: ServerEndpoints): Record<string, Probe> {
  return {
    ejabberd: endpoints.ejabberdStatus,
    livekit: httpProbe(`${endpoints.livekitUrl.replace(/\/$/, '')}/`),
    minio: httpProbe(`${endpoints.s3Endpoint.replace(/\/$/, '')}/minio/health/ready`),
  };
}
