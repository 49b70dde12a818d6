import { describe, expect, test } from 'vitest';
import type { EventStatus } from '../gql/graphql';
import { EVENT_STATUS, EVENT_STATUSES, actionText, applyEventUpdate, canRetryOrDismiss, cooldownText, providerFromParam, syncSummary } from './labels';

describe('event statuses', () => {
  test('every status has a label, a meaning, and a colour or none', () => {
    expect(EVENT_STATUSES).toEqual(['PENDING', 'WAITING', 'REVIEW', 'CONFIRMED', 'DISMISSED']);
    expect(EVENT_STATUSES.map((status) => EVENT_STATUS[status].label)).toEqual(['Pending', 'Waiting for you', 'Needs review', 'Confirmed', 'Dismissed']);
    for (const status of EVENT_STATUSES) expect(EVENT_STATUS[status].meaning.length).toBeGreaterThan(10);
    expect(EVENT_STATUS.CONFIRMED.level).toBe(0);
    expect(EVENT_STATUS.REVIEW.level).toBe(3);
    expect(EVENT_STATUS.DISMISSED.level).toBeNull();
  });

  test('only events waiting for a person can be retried or dismissed', () => {
    expect(EVENT_STATUSES.filter(canRetryOrDismiss)).toEqual(['WAITING', 'REVIEW']);
  });
});

describe('actionText', () => {
  test('says what the event changes', () => {
    expect(actionText('PROGRESS', { chapters: 12 })).toBe('Read up to chapter 12');
    expect(actionText('RATING', { stars: 4.5 })).toBe('Rated 4.5 of 5');
    expect(actionText('WANT_TO_READ', {})).toBe('Added to want to read');
    expect(actionText('REMOVAL', {})).toBe('Removed from the list');
  });

  test('survives a value it does not know', () => {
    expect(actionText('PROGRESS', null)).toBe('Progress');
    expect(actionText('RATING', { stars: 'four' })).toBe('Rating');
    expect(actionText(null)).toBe('Unknown action');
  });
});

describe('cooldownText', () => {
  const now = Date.parse('2026-12-04T10:00:00Z');
  test('says how long a host waits', () => {
    expect(cooldownText('kavita.local:5000', '2026-12-04T10:00:30Z', now)).toBe('kavita.local:5000, for 30 seconds more');
    expect(cooldownText('graphql.anilist.co', '2026-12-04T10:05:00Z', now)).toBe('graphql.anilist.co, for 5 minutes more');
  });
  test('a past or unreadable deadline is ending', () => {
    expect(cooldownText('h', '2026-12-04T09:00:00Z', now)).toBe('h, ending now');
    expect(cooldownText('h', 'soon', now)).toBe('h, ending now');
  });
});

describe('providerFromParam', () => {
  test('reads the route parameter in any case', () => {
    expect(providerFromParam('kavita')).toBe('KAVITA');
    expect(providerFromParam('AniList')).toBe('ANILIST');
    expect(providerFromParam('mal')).toBeNull();
    expect(providerFromParam(undefined)).toBeNull();
  });
});

describe('applyEventUpdate', () => {
  const event = (id: string, status: EventStatus) => ({ id, status });
  const list = [event('3', 'PENDING'), event('2', 'REVIEW'), event('1', 'CONFIRMED')];

  test('replaces a shown event where it stands', () => {
    const next = applyEventUpdate(list, event('2', 'CONFIRMED'), null);
    expect(next.map((entry) => `${entry.id}:${entry.status}`)).toEqual(['3:PENDING', '2:CONFIRMED', '1:CONFIRMED']);
    expect(list[1].status).toBe('REVIEW');
  });

  test('keeps a shown event in place even when it leaves the filter', () => {
    const reviews = [event('2', 'REVIEW')];
    expect(applyEventUpdate(reviews, event('2', 'DISMISSED'), 'REVIEW')).toEqual([event('2', 'DISMISSED')]);
  });

  test('puts a new event on top when it matches the filter', () => {
    expect(applyEventUpdate(list, event('4', 'PENDING'), null)[0]).toEqual(event('4', 'PENDING'));
    expect(applyEventUpdate(list, event('4', 'PENDING'), 'PENDING')).toHaveLength(4);
  });

  test('ignores a new event outside the filter', () => {
    expect(applyEventUpdate(list, event('4', 'PENDING'), 'REVIEW')).toBe(list);
  });
});

describe('syncSummary', () => {
  test('says what a sync read, sent and left to confirm', () => {
    expect(syncSummary({ seriesRead: 2, linked: 1, proposed: 1, events: 2, failed: [] })).toBe(
      'Sync finished: 2 series read on Kavita, 2 changes sent to AniList, 1 title link to confirm below.',
    );
    expect(syncSummary({ seriesRead: 1, linked: 0, proposed: 0, events: 1 })).toBe('Sync finished: 1 series read on Kavita, 1 change sent to AniList.');
    expect(syncSummary({ seriesRead: 0, proposed: 0, events: 0 })).toBe('Sync finished: nothing read, rated or wanted on Kavita yet.');
  });

  test('survives a result it does not know', () => {
    expect(syncSummary(null)).toBe('Sync finished.');
    expect(syncSummary({ seriesRead: 'two' })).toBe('Sync finished.');
  });
});
