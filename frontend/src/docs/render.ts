// Markdown and snippets to safe HTML. This module is only in the docs
// chunk (with `marked` and DOMPurify), never in the reader's entry.
import DOMPurify from 'dompurify';
import { marked, type Tokens } from 'marked';
import { docHref, markersToBadges, mirrorAssetHref, resolveDocLink } from './paths';

/** The document being rendered (mirror path and client URL): its relative links resolve against it. */
let current: { path: string; base: string } | null = null;

let hooked = false;
function hook() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    const element = node as Element;
    if (element.tagName === 'IMG') {
      // Raw HTML images; Markdown ones were rewritten before (walkTokens).
      const asset = current && mirrorAssetHref(element.getAttribute('src') ?? '', current.path);
      if (asset) element.setAttribute('src', asset);
      return;
    }
    if (element.tagName !== 'A') return;
    const href = element.getAttribute('href') ?? '';
    if (/^https?:/i.test(href)) {
      element.setAttribute('target', '_blank');
      element.setAttribute('rel', 'noopener noreferrer');
    } else if (current) {
      const resolved = mirrorAssetHref(href, current.path) ?? resolveDocLink(href, current.base);
      if (resolved) element.setAttribute('href', resolved);
    }
  });
}

/** A document body as sanitized HTML, degradation markers as visible badges. */
export function renderMarkdown(markdown: string, path?: string): string {
  hook();
  // Images and links to the mirror's asset pool point at the server's
  // asset route (same origin: the session cookie and `img-src 'self'` allow them).
  const walkTokens = (token: Tokens.Generic) => {
    if (!path || (token.type !== 'image' && token.type !== 'link')) return;
    const asset = mirrorAssetHref(token.href, path);
    if (asset) token.href = asset;
  };
  const html = marked.parse(markersToBadges(markdown), { async: false, gfm: true, walkTokens }) as string;
  current = path ? { path, base: docHref(path) } : null;
  try {
    return DOMPurify.sanitize(html, { FORBID_TAGS: ['style', 'form', 'input', 'iframe'], FORBID_ATTR: ['style'] });
  } finally {
    current = null;
  }
}

/** A search snippet: the server's escaped text with `<mark>`, only `mark` kept. */
export function renderSnippet(snippet: string): string {
  return DOMPurify.sanitize(snippet, { ALLOWED_TAGS: ['mark'], ALLOWED_ATTR: [] });
}
