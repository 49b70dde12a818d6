// A feed's icon: its first letter on a tinted square. (The server's favicon
// route, `GET /icons/{id}/{sig}` (GraphQL `iconUrl`), takes over once it exists.)
import type { Feed } from './store';

export function FeedIcon({ feed }: { feed: Pick<Feed, 'id' | 'name'> }) {
  const letter = (feed.name.trim()[0] ?? '?').toUpperCase();
  return (
    <span class="feed-icon letter" aria-hidden="true">
      {letter}
    </span>
  );
}
