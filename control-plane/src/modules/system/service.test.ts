import { describe, expect, it } from 'vitest';
import { watchDependencies } from './service.js';

describe('watchDependencies', () => {
  it('probes once for every caller within a second, concurrent or not, and again after it', async () => {
    let probed = 0;
    const dependencies = watchDependencies({
      postgres: async () => {
        probed += 1;
      },
    });
    const rounds = await Promise.all(Array.from({ length: 50 }, () => dependencies()));
    for (let ask = 0; ask < 50; ask += 1) await dependencies();
    expect(probed).toBe(1);
    expect(rounds[0]).toMatchObject({ ready: true, checks: { postgres: 'ok' } });
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    await dependencies();
    expect(probed).toBe(2);
  });

  it('starts no round while one is still waiting for a slow probe', async () => {
    let probed = 0;
    let answer = () => {};
    const dependencies = watchDependencies({
      livekit: () => {
        probed += 1;
        return new Promise<void>((resolve) => {
          answer = resolve;
        });
      },
    });
    const first = dependencies();
    await new Promise((resolve) => setTimeout(resolve, 1_050));
    expect(dependencies()).toBe(first);
    expect(probed).toBe(1);
    answer();
    await first;
    expect(dependencies()).toBe(first);
    expect(probed).toBe(1);
  });
});
