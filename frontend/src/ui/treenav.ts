// The pure part of a WAI-ARIA tree, shared by the live dashboard's node
// tree and the docs browser's mirrored tree: which rows are visible (a
// depth-first walk of the expanded branches, with level, position and set
// size for aria-level/posinset/setsize) and what a key does in it. No DOM,
// no network: each page keeps its own data and loading, and acts on the
// returned action.

/** What the keyboard model needs of a visible row. */
export interface NavRow {
  id: string;
  /** The parent's id (null for a root). */
  parentId: string | null;
  /** It has (or may have) children. */
  expandable: boolean;
  expanded: boolean;
}

export interface FlatRow<T> extends NavRow {
  item: T;
  /** Depth in the tree (0 for a root). */
  level: number;
  /** Position among its visible siblings, 1-based, and their number. */
  position: number;
  siblings: number;
}

export interface FlattenOptions<T> {
  id(item: T): string;
  /** The children known for an item (undefined: none loaded). */
  children(item: T): readonly T[] | undefined;
  expandable(item: T): boolean;
  expanded(item: T): boolean;
}

/** The visible rows, parents before children, in the given order. */
export function flattenTree<T>(roots: readonly T[], options: FlattenOptions<T>): FlatRow<T>[] {
  const out: FlatRow<T>[] = [];
  const walk = (items: readonly T[], parentId: string | null, level: number) => {
    items.forEach((item, index) => {
      const id = options.id(item);
      const expandable = options.expandable(item);
      const expanded = expandable && options.expanded(item);
      out.push({ item, id, parentId, level, position: index + 1, siblings: items.length, expandable, expanded });
      const kids = expanded ? options.children(item) : undefined;
      if (kids) walk(kids, id, level + 1);
    });
  };
  walk(roots, null, 0);
  return out;
}

export type TreeAction =
  /** Move the focus (and selection) to this row. */
  | { type: 'focus'; id: string }
  /** Open this row's children (loading them if needed). */
  | { type: 'expand'; id: string }
  | { type: 'collapse'; id: string }
  /** Enter or Space on this row: the page decides (open a document, toggle a branch). */
  | { type: 'activate'; id: string };

/** Rows a Page Up/Down moves. */
export const PAGE_ROWS = 15;

/**
 * What a key does on the row at `index` of the visible `rows` (null: the
 * key is not the tree's; let it through). Up/Down move, Home/End go to
 * the ends, Right opens a closed branch or moves to its first child, Left
 * closes an open branch or moves to the parent, Enter/Space activate.
 * With `label`, a printable character moves to the next row whose label
 * starts with it (typeahead).
 */
export function treeKey(
  rows: readonly NavRow[],
  index: number,
  event: { key: string; ctrlKey?: boolean; metaKey?: boolean; altKey?: boolean },
  label?: (row: NavRow, index: number) => string,
): TreeAction | null {
  if (!rows.length) return null;
  const at = Math.max(0, Math.min(rows.length - 1, index));
  const row = rows[at];
  const go = (next: number): TreeAction => ({ type: 'focus', id: rows[Math.max(0, Math.min(rows.length - 1, next))].id });
  if (event.ctrlKey || event.metaKey || event.altKey) return null;
  switch (event.key) {
    case 'ArrowDown':
      return go(at + 1);
    case 'ArrowUp':
      return go(at - 1);
    case 'Home':
      return go(0);
    case 'End':
      return go(rows.length - 1);
    case 'PageDown':
      return go(at + PAGE_ROWS);
    case 'PageUp':
      return go(at - PAGE_ROWS);
    case 'ArrowRight':
      if (row.expandable && !row.expanded) return { type: 'expand', id: row.id };
      if (row.expanded && rows[at + 1]?.parentId === row.id) return go(at + 1);
      return null;
    case 'ArrowLeft':
      if (row.expanded) return { type: 'collapse', id: row.id };
      return row.parentId === null ? null : { type: 'focus', id: row.parentId };
    case 'Enter':
    case ' ':
      return { type: 'activate', id: row.id };
  }
  if (label && event.key.length === 1 && event.key.trim()) {
    const wanted = event.key.toLocaleLowerCase();
    for (let step = 1; step <= rows.length; step += 1) {
      const next = (at + step) % rows.length;
      if (label(rows[next], next).trim().toLocaleLowerCase().startsWith(wanted)) return { type: 'focus', id: rows[next].id };
    }
  }
  return null;
}
