// The body's rendering: images and links to the mirror's asset pool
// point at the server's asset route; other relative images stay as
// written. (happy-dom lets DOMPurify pass the HTML through, so this checks
// the Markdown side; Chromium runs the sanitizer's hook in the e2e.)
import { describe, expect, test } from 'vitest';
import { renderMarkdown } from './render';

const sha = `ab${'cd'.repeat(31)}`;

function parse(html: string): Document {
  return new DOMParser().parseFromString(html, 'text/html');
}

describe('renderMarkdown', () => {
  test('an image in the pool gets the asset route; an attachment link too', () => {
    const doc = parse(renderMarkdown(`Look:\n\n![diagram](../../assets/ab/${sha}.png)\n\n[the slides](../../assets/ab/${sha}.pdf)\n`, 'notion/Team/Notes.md'));
    expect(doc.querySelector('img')?.getAttribute('src')).toBe(`/mirror/assets/ab/${sha}.png`);
    expect(doc.querySelector('img')?.getAttribute('alt')).toBe('diagram');
    expect(doc.querySelector('a')?.getAttribute('href')).toBe(`/mirror/assets/ab/${sha}.pdf`);
  });

  test('a link that does not land on a pool file is left alone', () => {
    const doc = parse(renderMarkdown(`![x](../assets/ab/${sha}.png) ![y](x.png) ![z](https://example.com/a.png)`, 'notion/Team/Notes.md'));
    expect([...doc.querySelectorAll('img')].map((img) => img.getAttribute('src'))).toEqual([`../assets/ab/${sha}.png`, 'x.png', 'https://example.com/a.png']);
  });

  test('without a document path nothing is rewritten', () => {
    const doc = parse(renderMarkdown(`![d](assets/ab/${sha}.png)`));
    expect(doc.querySelector('img')?.getAttribute('src')).toBe(`assets/ab/${sha}.png`);
  });
});
