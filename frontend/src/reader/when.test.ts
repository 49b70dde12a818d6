import { describe, expect, test } from 'vitest';
import { when } from './when';

describe('when', () => {
  const now = Date.parse('2026-12-04T12:00:00Z');
  const relative = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });

  test('minutes, hours and days relative to now, then the date', () => {
    expect(when('2026-12-04T11:55:00Z', now)).toBe(relative.format(-5, 'minute'));
    expect(when('2026-12-04T09:00:00Z', now)).toBe(relative.format(-3, 'hour'));
    expect(when('2026-12-02T12:00:00Z', now)).toBe(relative.format(-2, 'day'));
    expect(when('2026-11-02T12:00:00Z', now)).toBe(new Intl.DateTimeFormat(undefined, { month: 'short', day: 'numeric' }).format(Date.parse('2026-11-02T12:00:00Z')));
  });
});
