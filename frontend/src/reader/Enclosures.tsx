// An article's attached files (a podcast episode, a video, an image). Their
// URLs are remote: nothing is fetched until the reader asks — audio and
// video say `preload="none"` (the CSP's `media-src` allows http(s) for
// exactly this), an image waits behind a "Show image" button — and a URL
// that is not http(s) is never rendered.
import { useState } from 'preact/hooks';
import type { ReaderItemQuery } from '../gql/graphql';

export type Enclosure = NonNullable<ReaderItemQuery['item']>['enclosures'][number];

/** The URL when its scheme is http or https; null otherwise (`javascript:`, `data:`…). */
export function webUrl(url: string): string | null {
  try {
    const parsed = new URL(url);
    return parsed.protocol === 'https:' || parsed.protocol === 'http:' ? parsed.href : null;
  } catch {
    return null;
  }
}

/** The last path segment, decoded, or the host when the path has none. */
export function fileName(url: string): string {
  const parsed = new URL(url);
  const last = parsed.pathname.split('/').filter(Boolean).pop();
  if (!last) return parsed.host;
  try {
    return decodeURIComponent(last);
  } catch {
    return last;
  }
}

/** `length` (decimal bytes, maybe empty or junk) as "12.3 MB"; null when unknown. */
export function humanSize(length: string | null | undefined): string | null {
  if (!length || !/^\d+$/.test(length.trim())) return null;
  const bytes = Number(length.trim());
  if (!Number.isFinite(bytes) || bytes === 0) return null;
  const units = ['B', 'KB', 'MB', 'GB', 'TB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1000 && unit < units.length - 1) {
    value /= 1000;
    unit += 1;
  }
  return unit === 0 ? `${value} B` : `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}

export type Kind = 'audio' | 'video' | 'image' | 'file';

export function kindOf(mimeType: string | null | undefined): Kind {
  const type = (mimeType ?? '').toLowerCase();
  if (type.startsWith('audio/')) return 'audio';
  if (type.startsWith('video/')) return 'video';
  if (type.startsWith('image/')) return 'image';
  return 'file';
}

function Download({ url, length }: { url: string; length?: string | null }) {
  const size = humanSize(length);
  return (
    <a class="enclosure-download" href={url} download target="_blank" rel="noopener noreferrer">
      Download {fileName(url)}
      {size && <span class="enclosure-size"> ({size})</span>}
    </a>
  );
}

function LazyImage({ url }: { url: string }) {
  const [shown, setShown] = useState(false);
  if (shown) return <img class="enclosure-image" src={url} alt={fileName(url)} referrerpolicy="no-referrer" />;
  return (
    <button type="button" class="btn small" onClick={() => setShown(true)}>
      Show image {fileName(url)}
    </button>
  );
}

function One({ enclosure, url }: { enclosure: Enclosure; url: string }) {
  switch (kindOf(enclosure.mimeType)) {
    case 'audio':
      return (
        <>
          <audio controls preload="none" src={url} aria-label={`Audio: ${fileName(url)}`} />
          <Download url={url} length={enclosure.length} />
        </>
      );
    case 'video':
      return (
        <>
          <video controls preload="none" src={url} aria-label={`Video: ${fileName(url)}`} />
          <Download url={url} length={enclosure.length} />
        </>
      );
    case 'image':
      return <LazyImage url={url} />;
    default:
      return <Download url={url} length={enclosure.length} />;
  }
}

export function Enclosures({ enclosures }: { enclosures: readonly Enclosure[] }) {
  const safe = enclosures.flatMap((enclosure) => {
    const url = webUrl(enclosure.url);
    return url ? [{ enclosure, url }] : [];
  });
  if (!safe.length) return null;
  return (
    <section class="enclosures" aria-label="Attachments">
      <ul>
        {safe.map(({ enclosure, url }, index) => (
          <li key={`${index}:${url}`} class={`enclosure ${kindOf(enclosure.mimeType)}`}>
            <One enclosure={enclosure} url={url} />
          </li>
        ))}
      </ul>
    </section>
  );
}
