// Markdown and snippets to safe HTML. This module is only in the docs
// chunk (with `marked` and DOMPurify), never in the reader's entry.
import DOMPurify from 'dompurify';
import { marked } from 'marked';
import { docHref, markersToBadges, resolveDocLink } from './paths';

/** The client URL of the document being rendered: its relative links resolve against it. */
let base: string | null = null;

let hooked = false;
function hook() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    const element = node as Element;
    if (element.tagName !== 'A') return;
    const href = element.getAttribute('href') ?? '';
    if (/^https?:/i.test(href)) {
      element.setAttribute('target', '_blank');
      element.setAttribute('rel', 'noopener noreferrer');
    } else if (base) {
      const resolved = resolveDocLink(href, base);
      if (resolved) element.setAttribute('href', resolved);
    }
  });
}

/** A document body as sanitized HTML, degradation markers as visible badges. */
export function renderMarkdown(markdown: string, path?: string): string {
  hook();
  const html = marked.parse(markersToBadges(markdown), { async: false, gfm: true }) as string;
  base = path ? docHref(path) : null;
  try {
    return DOMPurify.sanitize(html, { FORBID_TAGS: ['style', 'form', 'input', 'iframe'], FORBID_ATTR: ['style'] });
  } finally {
    base = null;
  }
}

/** A search snippet: the server's escaped text with `<mark>`, only `mark` kept. */
export function renderSnippet(snippet: string): string {
  return DOMPurify.sanitize(snippet, { ALLOWED_TAGS: ['mark'], ALLOWED_ATTR: [] });
}
