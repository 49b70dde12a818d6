// Markdown and snippets to safe HTML. This module is only in the docs
// chunk (with `marked` and DOMPurify), never in the reader's entry.
import DOMPurify from 'dompurify';
import { marked } from 'marked';
import { markersToBadges } from './paths';

let hooked = false;
function hook() {
  if (hooked) return;
  hooked = true;
  DOMPurify.addHook('afterSanitizeAttributes', (node) => {
    const element = node as Element;
    if (element.tagName === 'A' && /^https?:/i.test(element.getAttribute('href') ?? '')) {
      element.setAttribute('target', '_blank');
      element.setAttribute('rel', 'noopener noreferrer');
    }
  });
}

/** A document body as sanitized HTML, degradation markers as visible badges. */
export function renderMarkdown(markdown: string): string {
  hook();
  const html = marked.parse(markersToBadges(markdown), { async: false, gfm: true }) as string;
  return DOMPurify.sanitize(html, { FORBID_TAGS: ['style', 'form', 'input', 'iframe'], FORBID_ATTR: ['style'] });
}

/** A search snippet: the server's escaped text with `<mark>`, only `mark` kept. */
export function renderSnippet(snippet: string): string {
  return DOMPurify.sanitize(snippet, { ALLOWED_TAGS: ['mark'], ALLOWED_ATTR: [] });
}
