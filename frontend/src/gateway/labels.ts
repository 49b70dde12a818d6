// The gateway's words: provider, feature and status names, an event's
// action in a sentence, cooldowns, and how a live event update lands in
// the list on screen. Pure (no DOM, no server): tested on their own.
import type { ActionKind, EventStatus, GatewayFeature, LinkStatus, Provider, ReceiptRetention, TitleLinkState } from '../gql/graphql';
import { formatWait } from '../ui/states';

export const PROVIDER_NAME: Record<Provider, string> = {
  KAVITA: 'Kavita',
  ANILIST: 'AniList',
};

/** The provider for a route parameter (`/gateway/providers/kavita`), or null. */
export function providerFromParam(param: string | undefined): Provider | null {
  const upper = param?.toUpperCase();
  return upper === 'KAVITA' || upper === 'ANILIST' ? upper : null;
}

export const FEATURE_LABEL: Record<GatewayFeature, string> = {
  PUBLIC_METADATA: 'Public catalog',
  PROGRESS: 'Reading progress',
  RATING: 'Ratings',
  WANT_TO_READ: 'Want to read',
  REMOVAL: 'Removal from the list',
  SCROBBLE_FROM_KAVITA: 'Scrobbling from Kavita',
};

/**
 * How a status looks: its label, a level for colour (0 good … 3 needs
 * someone; null neutral) and a sentence saying what it means.
 */
export interface StatusLook {
  label: string;
  level: 0 | 1 | 2 | 3 | null;
  meaning: string;
}

export const EVENT_STATUS: Record<EventStatus, StatusLook> = {
  PENDING: { label: 'Pending', level: 1, meaning: 'Being delivered, or waiting for the provider.' },
  WAITING: { label: 'Waiting for you', level: 2, meaning: 'The account is not linked, or must be linked again.' },
  REVIEW: { label: 'Needs review', level: 3, meaning: 'Waiting for someone to decide; the reason says why.' },
  CONFIRMED: { label: 'Confirmed', level: 0, meaning: 'A read-back showed the change at the provider.' },
  DISMISSED: { label: 'Dismissed', level: null, meaning: 'Set aside: nothing more is sent.' },
};

/** The statuses in the order the filter offers them. */
export const EVENT_STATUSES: EventStatus[] = ['PENDING', 'WAITING', 'REVIEW', 'CONFIRMED', 'DISMISSED'];

/** Only events waiting for a person can be retried or dismissed. */
export function canRetryOrDismiss(status: EventStatus): boolean {
  return status === 'REVIEW' || status === 'WAITING';
}

export const LINK_STATUS: Record<LinkStatus, StatusLook> = {
  LINKED: { label: 'Linked', level: 0, meaning: 'The provider accepted the credential when it was last used.' },
  NEEDS_RELINK: { label: 'Link again', level: 3, meaning: 'The provider refused the credential: link the account again.' },
};

export const TITLE_LINK_STATE: Record<TitleLinkState, string> = {
  CONFIRMED: 'Confirmed',
  PROPOSED: 'To confirm',
};

export const TITLE_LINK_SOURCE: Record<string, string> = {
  WEB_LINK: 'the series’ web link',
  SEARCH: 'a title search',
  USER: 'you',
};

export const RETENTION_LABEL: Record<ReceiptRetention, string> = {
  PROTECTED: 'Kept',
  RECONCILED: 'Expires',
};

function numberIn(value: unknown, key: string): number | null {
  if (!value || typeof value !== 'object') return null;
  const found = (value as Record<string, unknown>)[key];
  return typeof found === 'number' && Number.isFinite(found) ? found : null;
}

/** An event's action in words: "Chapter 12 read", "Rated 4.5 of 5". */
export function actionText(action: ActionKind | null | undefined, value?: unknown): string {
  switch (action) {
    case 'PROGRESS': {
      const chapters = numberIn(value, 'chapters') ?? numberIn(value, 'progress');
      return chapters === null ? 'Progress' : `Read up to chapter ${chapters}`;
    }
    case 'RATING': {
      const stars = numberIn(value, 'stars') ?? numberIn(value, 'rating');
      return stars === null ? 'Rating' : `Rated ${stars} of 5`;
    }
    case 'WANT_TO_READ':
      return 'Added to want to read';
    case 'REMOVAL':
      return 'Removed from the list';
    default:
      return 'Unknown action';
  }
}

function plural(count: number, one: string, many: string): string {
  return `${count} ${count === 1 ? one : many}`;
}

/**
 * What a finished sync did, from its task's result (`gateway.scrobble`:
 * `seriesRead`, `proposed`, `events`): "Sync finished: 2 series read on
 * Kavita, 2 changes sent to AniList, 1 title link to confirm below."
 */
export function syncSummary(result: unknown): string {
  const read = numberIn(result, 'seriesRead');
  const sent = numberIn(result, 'events');
  if (read === null || sent === null) return 'Sync finished.';
  if (read === 0) return 'Sync finished: nothing read, rated or wanted on Kavita yet.';
  const proposed = numberIn(result, 'proposed') ?? 0;
  const parts = [`${read} series read on Kavita`, `${plural(sent, 'change', 'changes')} sent to AniList`];
  if (proposed > 0) parts.push(`${plural(proposed, 'title link', 'title links')} to confirm below`);
  return `Sync finished: ${parts.join(', ')}.`;
}

/** A host in cooldown: "api.example.com, for 5 minutes more" (or "ending now"). */
export function cooldownText(host: string, until: string, now: number): string {
  const seconds = Math.ceil((Date.parse(until) - now) / 1000);
  if (!Number.isFinite(seconds) || seconds <= 0) return `${host}, ending now`;
  return `${host}, for ${formatWait(seconds)} more`;
}

interface Evented {
  id: string;
  status: EventStatus;
}

/**
 * A live update applied to the list on screen: an event already shown is
 * replaced where it stands (rows never move under the focus, even if its
 * new status no longer matches the filter); a new one that matches the
 * filter goes on top (the list is newest first). Returns the same array
 * when nothing changes.
 */
export function applyEventUpdate<T extends Evented>(list: T[], event: T, filter: EventStatus | null): T[] {
  const index = list.findIndex((entry) => entry.id === event.id);
  if (index >= 0) {
    const next = [...list];
    next[index] = event;
    return next;
  }
  if (filter !== null && event.status !== filter) return list;
  return [event, ...list];
}
