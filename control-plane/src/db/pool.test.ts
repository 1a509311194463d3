import { describe, expect, it } from 'vitest';
import { withSessionSetting } from './pool.js';

describe('withSessionSetting', () => {
  const optionsOf = (url: string) => new URL(url).searchParams.get('options');

  it('adds the setting to the sessions of a URL that sets none', () => {
    const url = withSessionSetting(
      'postgres://svc:p%40ss%2Fw+rd@db:5432/svc',
      'plan_cache_mode',
      'force_custom_plan',
    );
    expect(optionsOf(url)).toBe('-c plan_cache_mode=force_custom_plan');
    expect(decodeURIComponent(new URL(url).password)).toBe('p@ss/w+rd');
    expect(new URL(url).pathname).toBe('/svc');
  });

  it('keeps what the URL sets, its setting last, and the URL’s other parameters', () => {
    const url = withSessionSetting(
      'postgres://svc@db/svc?sslmode=require&options=-c%20search_path%3Dx&options=-c%20search_path%3Dy',
      'plan_cache_mode',
      'force_custom_plan',
    );
    // Of several `options`, slonik reads the last: the one kept.
    expect(new URL(url).searchParams.getAll('options')).toEqual([
      '-c search_path=y -c plan_cache_mode=force_custom_plan',
    ]);
    expect(new URL(url).searchParams.get('sslmode')).toBe('require');
  });
});
