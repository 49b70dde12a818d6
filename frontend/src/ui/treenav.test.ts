import { describe, expect, test } from 'vitest';
import { flattenTree, treeKey, type FlatRow } from './treenav';

interface Item {
  name: string;
  kids?: Item[];
}

/** docs/ (a/, b) and readme, with `open` naming the expanded folders. */
function rows(open: string[]): FlatRow<Item>[] {
  const tree: Item[] = [
    { name: 'docs', kids: [{ name: 'a', kids: [{ name: 'a1' }] }, { name: 'b' }] },
    { name: 'readme' },
    { name: 'empty', kids: [] },
  ];
  return flattenTree(tree, {
    id: (item) => item.name,
    children: (item) => item.kids,
    expandable: (item) => item.kids !== undefined,
    expanded: (item) => open.includes(item.name),
  });
}

const key = (key: string, more: object = {}) => ({ key, ...more });

describe('flattenTree', () => {
  test('walks open branches only, with level, position and set size', () => {
    expect(rows([]).map((row) => row.id)).toEqual(['docs', 'readme', 'empty']);
    const open = rows(['docs', 'a']);
    expect(open.map((row) => row.id)).toEqual(['docs', 'a', 'a1', 'b', 'readme', 'empty']);
    expect(open.map((row) => row.level)).toEqual([0, 1, 2, 1, 0, 0]);
    expect(open.map((row) => `${row.position}/${row.siblings}`)).toEqual(['1/3', '1/2', '1/1', '2/2', '2/3', '3/3']);
    expect(open.map((row) => row.parentId)).toEqual([null, 'docs', 'a', 'docs', null, null]);
    expect(open[4]).toMatchObject({ expandable: false, expanded: false });
    // Open but not expandable never counts as expanded.
    expect(rows(['readme'])[1].expanded).toBe(false);
  });
});

describe('treeKey', () => {
  test('Up and Down move between visible rows and stop at the ends; Home and End jump', () => {
    const open = rows(['docs']);
    expect(treeKey(open, 0, key('ArrowDown'))).toEqual({ type: 'focus', id: 'a' });
    expect(treeKey(open, 1, key('ArrowUp'))).toEqual({ type: 'focus', id: 'docs' });
    expect(treeKey(open, 0, key('ArrowUp'))).toEqual({ type: 'focus', id: 'docs' });
    expect(treeKey(open, open.length - 1, key('ArrowDown'))).toEqual({ type: 'focus', id: 'empty' });
    expect(treeKey(open, 2, key('Home'))).toEqual({ type: 'focus', id: 'docs' });
    expect(treeKey(open, 0, key('End'))).toEqual({ type: 'focus', id: 'empty' });
    expect(treeKey(open, 0, key('PageDown'))).toEqual({ type: 'focus', id: 'empty' });
    // A lost focus (index -1 or past the end) starts from the nearest row.
    expect(treeKey(open, -1, key('ArrowUp'))).toEqual({ type: 'focus', id: 'docs' });
  });

  test('Right opens a closed branch, then moves to its first child; nothing on a leaf or an open empty branch', () => {
    expect(treeKey(rows([]), 0, key('ArrowRight'))).toEqual({ type: 'expand', id: 'docs' });
    expect(treeKey(rows(['docs']), 0, key('ArrowRight'))).toEqual({ type: 'focus', id: 'a' });
    expect(treeKey(rows([]), 1, key('ArrowRight'))).toBeNull();
    const withEmpty = rows(['empty']);
    expect(treeKey(withEmpty, 2, key('ArrowRight'))).toBeNull();
  });

  test('Left closes an open branch, else moves to the parent; nothing on a closed root', () => {
    const open = rows(['docs', 'a']);
    expect(treeKey(open, 1, key('ArrowLeft'))).toEqual({ type: 'collapse', id: 'a' });
    expect(treeKey(open, 2, key('ArrowLeft'))).toEqual({ type: 'focus', id: 'a' });
    expect(treeKey(open, 3, key('ArrowLeft'))).toEqual({ type: 'focus', id: 'docs' });
    expect(treeKey(open, 4, key('ArrowLeft'))).toBeNull();
  });

  test('Enter and Space activate; other keys and modified keys pass through', () => {
    const open = rows(['docs']);
    expect(treeKey(open, 3, key('Enter'))).toEqual({ type: 'activate', id: 'readme' });
    expect(treeKey(open, 1, key(' '))).toEqual({ type: 'activate', id: 'a' });
    expect(treeKey(open, 1, key('Tab'))).toBeNull();
    expect(treeKey(open, 1, key('ArrowDown', { altKey: true }))).toBeNull();
    expect(treeKey(open, 1, key('r'))).toBeNull();
    expect(treeKey([], 0, key('ArrowDown'))).toBeNull();
  });

  test('typeahead moves to the next row starting with the letter, wrapping around', () => {
    const open = rows(['docs']);
    const label = (row: { id: string }) => row.id;
    expect(treeKey(open, 0, key('r'), label)).toEqual({ type: 'focus', id: 'readme' });
    expect(treeKey(open, 4, key('D'), label)).toEqual({ type: 'focus', id: 'docs' });
    expect(treeKey(open, 0, key('z'), label)).toBeNull();
    expect(treeKey(open, 0, key('r', { ctrlKey: true }), label)).toBeNull();
  });
});
