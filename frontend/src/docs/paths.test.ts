import { describe, expect, test } from 'vitest';
import { countKinds, docHref, markersToBadges, mirrorAssetHref, parseMarkers, pathFromRest, platformOfPath, resolveDocLink, statRows } from './paths';

describe('paths', () => {
  test('a mirror path becomes a client URL under /docs and back', () => {
    expect(docHref('notion/Team A/Notes.md')).toBe('/docs/notion/Team%20A/Notes.md');
    expect(docHref('feishu/Wiki/设计.md')).toBe('/docs/feishu/Wiki/%E8%AE%BE%E8%AE%A1.md');
    expect(pathFromRest('notion/Team%20A/Notes.md')).toBe('notion/Team A/Notes.md');
    expect(pathFromRest(docHref('feishu/Wiki/设计.md').slice('/docs/'.length))).toBe('feishu/Wiki/设计.md');
    expect(pathFromRest(undefined)).toBeNull();
    expect(pathFromRest('')).toBeNull();
    expect(pathFromRest('notion/%E0%A4')).toBe('notion/%E0%A4');
  });

  test('the platform comes from the first segment', () => {
    expect(platformOfPath('notion/x.md')).toBe('NOTION');
    expect(platformOfPath('feishu')).toBe('FEISHU');
    expect(platformOfPath('assets/ab.png')).toBeNull();
    expect(platformOfPath(null)).toBeNull();
  });
});

describe('degradation markers', () => {
  const body = 'Intro\n\n<!-- opendoc:degraded kind=unsupported_block id=b1 -->\n\ntext <!-- opendoc:degraded kind="merged_cells" id=\'t-2\' --> end\n<!-- a plain comment -->';

  test('parsed in order with kind and id', () => {
    expect(parseMarkers(body)).toEqual([
      { kind: 'unsupported_block', id: 'b1' },
      { kind: 'merged_cells', id: 't-2' },
    ]);
    expect(parseMarkers('no markers')).toEqual([]);
  });

  test('become visible badges with escaped text; other comments stay', () => {
    const out = markersToBadges(body);
    expect(out).toContain('<span class="degraded" title="block b1">Degraded: unsupported block</span>');
    expect(out).toContain('Degraded: merged cells');
    expect(out).toContain('<!-- a plain comment -->');
    expect(markersToBadges('<!-- opendoc:degraded kind="a&b<img" id=1 -->')).toContain('Degraded: a&amp;b&lt;img');
  });

  test('counted by kind', () => {
    expect(countKinds([{ kind: 'b' }, { kind: 'a' }, { kind: 'b' }])).toEqual([
      { kind: 'b', count: 2 },
      { kind: 'a', count: 1 },
    ]);
  });
});

test('a run’s stats flatten to rows', () => {
  expect(statRows({ fetched: 2, degraded: { merged_cells: 1 }, ids: ['a', 'b'] })).toEqual([
    { name: 'fetched', value: '2' },
    { name: 'degraded.merged_cells', value: '1' },
    { name: 'ids', value: 'a, b' },
  ]);
  expect(statRows(null)).toEqual([]);
});

test('relative links between documents resolve under /docs', () => {
  const from = docHref('notion/Handbook/README.md');
  expect(resolveDocLink('Roadmap.md', from)).toBe('/docs/notion/Handbook/Roadmap.md');
  expect(resolveDocLink('../Team%20A/Notes.md#x', from)).toBe('/docs/notion/Team%20A/Notes.md#x');
  expect(resolveDocLink('../../../etc.md', from)).toBeNull();
  expect(resolveDocLink('https://example.com/', from)).toBeNull();
  expect(resolveDocLink('javascript:alert(1)', from)).toBeNull();
  expect(resolveDocLink('#top', from)).toBeNull();
  expect(resolveDocLink('/read', from)).toBeNull();
});

test('a relative link to the asset pool becomes the server\'s asset route; anything else is left alone', () => {
  const sha = `ab${'12'.repeat(31)}`;
  const doc = 'notion/Team/Notes.md';
  expect(mirrorAssetHref(`../../assets/ab/${sha}.png`, doc)).toBe(`/mirror/assets/ab/${sha}.png`);
  expect(mirrorAssetHref(`../../assets/ab/${sha}`, doc)).toBe(`/mirror/assets/ab/${sha}`);
  expect(mirrorAssetHref(`./../.././assets/ab/${sha}.pdf`, doc)).toBe(`/mirror/assets/ab/${sha}.pdf`);
  expect(mirrorAssetHref(`assets/ab/${sha}.png`, 'Readme.md')).toBe(`/mirror/assets/ab/${sha}.png`);
  expect(mirrorAssetHref(`../../../feishu/x/../../assets/ab/${sha}.png`, 'notion/a/b/c.md')).toBe(`/mirror/assets/ab/${sha}.png`);
  // Resolved from the wrong depth, above the mirror root, or not exactly a pool file.
  expect(mirrorAssetHref(`../assets/ab/${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../../assets/ab/${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/cd/${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha.slice(1)}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha.toUpperCase()}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha}.PNG`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha}.png?x=1`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha}.png#top`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha}/x.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets%2Fab/${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`..\\..\\assets\\ab\\${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`../../assets/ab/${sha}.png%`, doc)).toBeNull();
  expect(mirrorAssetHref(`/assets/ab/${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref(`https://example.com/assets/ab/${sha}.png`, doc)).toBeNull();
  expect(mirrorAssetHref('Other.md', doc)).toBeNull();
  expect(mirrorAssetHref('', doc)).toBeNull();
});
