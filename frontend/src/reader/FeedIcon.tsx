// A feed's icon: the image the server keeps for it (`GET /icons/{id}`,
// same origin), or its first letter on a tinted square while there is none
// or it fails to load. Both are the same fixed 16×16 box, so a row never
// jumps when the image arrives.
import { useState } from 'preact/hooks';
import type { Feed } from './store';

/** The icon's URL when it is ours (same origin); anything else is never requested. */
export function ownIcon(url: string | null | undefined): string | null {
  if (!url) return null;
  try {
    const resolved = new URL(url, location.href);
    return resolved.origin === location.origin ? resolved.href : null;
  } catch {
    return null;
  }
}

export function FeedIcon({ feed }: { feed: Pick<Feed, 'id' | 'name' | 'iconUrl'> }) {
  const [broken, setBroken] = useState(false);
  const src = broken ? null : ownIcon(feed.iconUrl);
  if (src) {
    return (
      <img class="feed-icon" src={src} alt="" width={16} height={16} loading="lazy" decoding="async" onError={() => setBroken(true)} />
    );
  }
  const letter = (feed.name.trim()[0] ?? '?').toUpperCase();
  return (
    <span class="feed-icon letter" aria-hidden="true">
      {letter}
    </span>
  );
}
