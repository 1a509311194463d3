import { describe, expect, it } from 'vitest';
import { callerOrder } from './caller.js';
import { inCodeUnitOrder } from './ordering.js';

describe('callerOrder', () => {
  it('sorts user ids as PostgreSQL\'s "C" collation does: by their UTF-8 bytes', () => {
    // Code units and UTF-8 bytes disagree past the BMP: U+10000 is a surrogate pair (0xD800…), below
    // U+E000 in code units, above it in bytes (F0… against EE…).
    const ids = ['\u{10000}', '\uE000', 'z', 'é', 'B', 'a', 'ab', 'a b'];
    const byBytes = [...ids].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)));
    const byCallerOrder = [...ids].sort((x, y) =>
      inCodeUnitOrder(
        callerOrder({ appId: 'app_1', mode: 'live', userId: x }),
        callerOrder({ appId: 'app_1', mode: 'live', userId: y }),
      ),
    );
    expect(byCallerOrder).toEqual(byBytes);
    expect(byBytes.indexOf('\uE000')).toBeLessThan(byBytes.indexOf('\u{10000}'));
  });

  it('puts an app and mode before any of their users', () => {
    const app = callerOrder({ appId: 'app_1', mode: 'live' });
    expect(inCodeUnitOrder(app, callerOrder({ appId: 'app_1', mode: 'live', userId: ' ' }))).toBe(-1);
    expect(
      inCodeUnitOrder(
        callerOrder({ appId: 'app_1', mode: 'live', userId: '~' }),
        callerOrder({ appId: 'app_1', mode: 'test' }),
      ),
    ).toBe(-1);
  });
});
