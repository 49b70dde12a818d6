// The docs browser's pure logic: client paths for mirror paths, the
// degradation markers in a document's body, a run's counters.

export type Platform = 'NOTION' | 'FEISHU';
export const PLATFORMS: Platform[] = ['NOTION', 'FEISHU'];
export const PLATFORM_NAME: Record<Platform, string> = { NOTION: 'Notion', FEISHU: 'Feishu' };

/** The client URL of a mirror path (`notion/Team/Notes.md` → `/docs/notion/Team/Notes.md`). */
export function docHref(path: string): string {
  return `/docs/${path.split('/').filter(Boolean).map(encodeURIComponent).join('/')}`;
}

/** The mirror path in a client URL's rest (`notion/Team%20A/x.md` → `notion/Team A/x.md`); null for `/docs`. */
export function pathFromRest(rest: string | undefined): string | null {
  if (!rest) return null;
  const parts = rest.split('/').filter(Boolean);
  if (parts.length === 0) return null;
  try {
    return parts.map((part) => decodeURIComponent(part)).join('/');
  } catch {
    return parts.join('/');
  }
}

/** The platform a mirror path lies under (`feishu/…` → FEISHU). */
export function platformOfPath(path: string | null): Platform | null {
  const head = path?.split('/')[0]?.toLowerCase();
  return head === 'notion' ? 'NOTION' : head === 'feishu' ? 'FEISHU' : null;
}

export interface Marker {
  kind: string;
  id: string;
}

const MARKER = /<!--\s*opendoc:degraded\b([^>]*?)-->/g;

function attr(text: string, name: string): string {
  const found = new RegExp(`\\b${name}=("([^"]*)"|'([^']*)'|([^\\s"']+))`).exec(text);
  return found ? (found[2] ?? found[3] ?? found[4] ?? '') : '';
}

/** The degradation markers (`<!-- opendoc:degraded kind=… id=… -->`) in a body, in order. */
export function parseMarkers(markdown: string): Marker[] {
  const found: Marker[] = [];
  for (const match of markdown.matchAll(MARKER)) {
    found.push({ kind: attr(match[1], 'kind') || 'unknown', id: attr(match[1], 'id') });
  }
  return found;
}

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]!);
}

/** What a degradation kind means, in words (`unsupported_block` → `unsupported block`). */
export function kindLabel(kind: string): string {
  return kind.replace(/[_-]+/g, ' ').trim() || 'unknown';
}

/**
 * The body with each marker replaced by a visible badge (escaped text in a
 * `span`, which the sanitizer keeps), so a reader sees where a block could
 * not be mirrored.
 */
export function markersToBadges(markdown: string): string {
  return markdown.replace(MARKER, (_whole, attrs: string) => {
    const kind = attr(attrs, 'kind') || 'unknown';
    const id = attr(attrs, 'id');
    const title = id ? ` title="block ${escapeHtml(id)}"` : '';
    return `<span class="degraded"${title}>Degraded: ${escapeHtml(kindLabel(kind))}</span>`;
  });
}

/** Degradations counted by kind, most first then by name. */
export function countKinds(degradations: { kind: string }[]): { kind: string; count: number }[] {
  const counts = new Map<string, number>();
  for (const { kind } of degradations) counts.set(kind, (counts.get(kind) ?? 0) + 1);
  return [...counts].map(([kind, count]) => ({ kind, count })).sort((a, b) => b.count - a.count || a.kind.localeCompare(b.kind));
}

/** A run's counters as label/value rows (nested objects flattened with a dot). */
export function statRows(stats: unknown, prefix = ''): { name: string; value: string }[] {
  if (stats === null || typeof stats !== 'object' || Array.isArray(stats)) {
    return prefix ? [{ name: prefix, value: Array.isArray(stats) ? stats.join(', ') : String(stats) }] : [];
  }
  return Object.entries(stats as Record<string, unknown>).flatMap(([key, value]) => {
    const name = prefix ? `${prefix}.${key}` : key;
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? statRows(value, name) : [{ name, value: Array.isArray(value) ? value.join(', ') : String(value) }];
  });
}

/**
 * A relative link in a document's body (the mirror writes links between
 * documents as relative file paths) as an absolute client URL, resolved
 * against the document's own client URL; null for anything else (other
 * schemes, absolute paths, fragments) or a link that leaves `/docs/`.
 */
export function resolveDocLink(href: string, from: string): string | null {
  if (!href || href.startsWith('#') || href.startsWith('/') || /^[a-z][a-z0-9+.-]*:/i.test(href)) return null;
  const url = new URL(href, `http://docs.invalid${from}`);
  return url.pathname.startsWith('/docs/') ? `${url.pathname}${url.search}${url.hash}` : null;
}

/** A file of the mirror's asset pool, relative to the mirror root: `assets/<sha[:2]>/<sha256>[.ext]`. */
const POOL_FILE = /^assets\/([0-9a-f]{2})\/([0-9a-f]{64})(\.[a-z0-9]{1,16})?$/;

/**
 * A relative link in a document's body to a file of the mirror's asset
 * pool (an image or attachment the sync downloaded), as the server's
 * route for it (`/mirror/assets/<sha[:2]>/<sha><ext>`). The link is
 * resolved against the document's own folder (`path` is its mirror path)
 * and accepted only if it lands exactly on a pool file, never above the
 * mirror root; null for anything else (left as it is).
 */
export function mirrorAssetHref(href: string, path: string): string | null {
  if (!href || href.startsWith('/') || /^[a-z][a-z0-9+.-]*:/i.test(href) || /[?#\\]/.test(href)) return null;
  const parts = path.split('/').filter(Boolean).slice(0, -1);
  for (const raw of href.split('/')) {
    let part: string;
    try {
      part = decodeURIComponent(raw);
    } catch {
      return null;
    }
    if (part === '' || part === '.') continue;
    if (part.includes('/') || part.includes('\\')) return null;
    if (part === '..') {
      if (!parts.length) return null;
      parts.pop();
    } else parts.push(part);
  }
  const found = POOL_FILE.exec(parts.join('/'));
  return found && found[2].startsWith(found[1]) ? `/mirror/assets/${found[1]}/${found[2]}${found[3] ?? ''}` : null;
}
