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
});
