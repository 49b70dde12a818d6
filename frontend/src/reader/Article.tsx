// The reading pane (its own chunk, with DOMPurify). The server already
// sanitized the content; DOMPurify runs again here, links open in a new
// tab without a referrer, and media from other origins become links (the
// page loads nothing from third parties).
import DOMPurify from 'dompurify';
import { useSignal } from '@preact/signals';
import { useEffect, useMemo, useRef } from 'preact/hooks';
import { ApiError, mutate, query } from '../api/client';
import { BookmarkItemDocument, ReaderItemDocument, type ReaderItemQuery } from '../gql/graphql';
import { prefs } from '../state/prefs';
import { Failed, Loading } from '../ui/states';
import { toast } from '../ui/toast';
import { IconBookmark, IconCheck, IconExternal, IconStar, IconStarFilled } from '../ui/icons';
import { cachedArticle, rememberArticle } from '../offline/articles';
import { feeds, marksOf, openArticle, setRead, setStarred, type Marks } from './store';

type Full = NonNullable<ReaderItemQuery['item']>;

let hooked = false;
function hook() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    const element = node as Element;
    if (element.tagName === 'A') {
      element.setAttribute('target', '_blank');
      element.setAttribute('rel', 'noopener noreferrer');
    }
  });
}

function foreign(src: string): boolean {
  if (!src || src.startsWith('data:')) return false;
  try {
    return new URL(src, location.href).origin !== location.origin;
  } catch {
    return true;
  }
}

/** Sanitized HTML in which media from other origins are links to them. */
export function clean(html: string): string {
  hook();
  const fragment = DOMPurify.sanitize(html, {
    FORBID_TAGS: ['style', 'form', 'input', 'button', 'textarea', 'select'],
    FORBID_ATTR: ['style', 'class', 'id'],
    RETURN_DOM_FRAGMENT: true,
  });
  for (const element of [...fragment.querySelectorAll('img, video, audio, iframe, picture, source')]) {
    const src = element.getAttribute('src') ?? element.getAttribute('srcset')?.trim().split(/\s/)[0] ?? '';
    if (!foreign(src) && !element.hasAttribute('srcset')) continue;
    const tag = element.tagName.toLowerCase();
    if (tag === 'source') {
      element.remove();
      continue;
    }
    const link = document.createElement('a');
    link.href = src;
    link.target = '_blank';
    link.rel = 'noopener noreferrer';
    link.className = 'media-link';
    const label = element.getAttribute('alt') || element.getAttribute('title') || '';
    link.textContent = `${tag === 'img' || tag === 'picture' ? 'Image' : 'Media'}${label ? `: ${label}` : ''} (opens the original)`;
    element.replaceWith(link);
  }
  const holder = document.createElement('div');
  holder.append(fragment);
  return holder.innerHTML;
}

function marksFrom({ id, feedId, link, unread, starred }: Marks): Marks {
  return { id, feedId, link, unread, starred };
}

export function Article({ id, onNext, onPrev }: { id: string; onNext: () => void; onPrev: () => void }) {
  const item = useSignal<Full | null>(null);
  const error = useSignal<unknown>(null);
  const scroller = useRef<HTMLDivElement>(null);

  useEffect(() => {
    let live = true;
    item.value = null;
    error.value = null;
    scroller.current?.parentElement?.scrollTo?.(0, 0);
    query(ReaderItemDocument, { id })
      .then(async (data) => {
        if (!live) return;
        if (!data.item) {
          error.value = new ApiError('This article no longer exists.', 'NOT_FOUND');
          return;
        }
        item.value = data.item;
        openArticle.value = marksFrom(data.item);
        void rememberArticle(data.item);
        if (prefs.value.markReadOnOpen && data.item.unread) setRead([data.item.id], true);
      })
      .catch(async (caught) => {
        if (!live) return;
        const cached = caught instanceof ApiError && caught.network ? await cachedArticle(id) : null;
        if (cached) {
          item.value = cached as Full;
          openArticle.value = marksFrom(cached);
          if (prefs.value.markReadOnOpen && cached.unread) setRead([id], true);
        } else error.value = caught;
      });
    return () => {
      live = false;
      if (openArticle.value?.id === id) openArticle.value = null;
    };
  }, [id]);

  // Swipe left/right for the next/previous article (phones).
  useEffect(() => {
    const element = scroller.current?.parentElement;
    if (!element) return;
    let start: { x: number; y: number } | null = null;
    const down = (event: TouchEvent) => {
      const touch = event.touches[0];
      start = touch ? { x: touch.clientX, y: touch.clientY } : null;
    };
    const up = (event: TouchEvent) => {
      const touch = event.changedTouches[0];
      if (!start || !touch) return;
      const dx = touch.clientX - start.x;
      const dy = touch.clientY - start.y;
      start = null;
      if (Math.abs(dx) > 70 && Math.abs(dy) < 50) (dx < 0 ? onNext : onPrev)();
    };
    element.addEventListener('touchstart', down, { passive: true });
    element.addEventListener('touchend', up, { passive: true });
    return () => {
      element.removeEventListener('touchstart', down);
      element.removeEventListener('touchend', up);
    };
  }, [onNext, onPrev]);

  const full = item.value;
  // Sanitized once per article: the pane re-renders on every j/k (its id
  // changes before the next article arrives) and on every read/star change.
  const html = useMemo(() => (full ? clean(full.content) : ''), [full]);
  if (error.value) return <Failed error={error.value} />;
  if (!full) return <Loading label="Loading the article…" />;
  // The list (or, when it could not load, the open article's marks) holds
  // the live read/star state.
  const marks = marksOf(full.id);
  const unread = marks?.unread ?? full.unread;
  const starred = marks?.starred ?? full.starred;
  const feed = feeds.value.get(full.feedId);
  const date = new Date(full.pubDate);

  return (
    <article class="article-inner" ref={scroller} aria-labelledby="article-title">
      <div class="row article-actions">
        <button type="button" class="btn small" aria-pressed={starred} onClick={() => setStarred([full.id], !starred)}>
          {starred ? <IconStarFilled size={14} /> : <IconStar size={14} />} {starred ? 'Starred' : 'Star'}
        </button>
        <button type="button" class="btn small" aria-pressed={!unread} onClick={() => setRead([full.id], unread)}>
          <IconCheck size={14} /> {unread ? 'Mark read' : 'Read'}
        </button>
        <button
          type="button"
          class="btn small"
          onClick={async () => {
            try {
              await mutate(BookmarkItemDocument, { itemId: full.id });
              toast('Bookmarked: a snapshot is saved.');
            } catch (caught) {
              toast(`Could not bookmark: ${(caught as Error).message}`);
            }
          }}
        >
          <IconBookmark size={14} /> Bookmark
        </button>
        {full.link && (
          <a class="btn small" href={full.link} target="_blank" rel="noopener noreferrer">
            <IconExternal size={14} /> Original
          </a>
        )}
      </div>
      <h1 id="article-title">
        {full.link ? (
          <a href={full.link} target="_blank" rel="noopener noreferrer">
            {full.title || '(untitled)'}
          </a>
        ) : (
          full.title || '(untitled)'
        )}
      </h1>
      <div class="byline">
        {feed && <span>{feed.name}</span>}
        <time dateTime={full.pubDate}>{date.toLocaleString()}</time>
      </div>
      <div class="content" dangerouslySetInnerHTML={{ __html: html }} />
    </article>
  );
}
