// The live dashboard's node tree, as a pure model: what is loaded, what
// is expanded, which rows are visible under the filter, and how a status
// change lands (in place: rows never reorder under the user's focus).
// No DOM, no network: the page feeds it nodes and changes. The walk and
// the keys are the shared tree's (`ui/treenav.ts`).

import { flattenTree, type FlatRow } from '../ui/treenav';

export interface TreeNode {
  id: string;
  parentId: string | null;
  class: string;
  positionToken: string;
  path: string;
  depth: number;
  status: number;
  aggregatedStatus: number;
  /** Children on the server (null: not known yet). */
  childCount: number | null;
  /** The worst aggregated status among the children (null: none or not known). */
  worstChildStatus: number | null;
}

/** A visible row: the shared tree row (level, position, set size) with the node. */
export interface Row extends FlatRow<TreeNode> {
  node: TreeNode;
  /** A change happened below this collapsed node since it was last opened. */
  changedInside: boolean;
}

export interface StatusChange {
  id: string;
  path: string;
  status: number;
  aggregatedStatus: number;
}

/** Ids in a materialized path `/1/42/`, root first. */
export function pathIds(path: string): string[] {
  return path.split('/').filter(Boolean);
}

export class TreeModel {
  readonly nodes = new Map<string, TreeNode>();
  /** Known children per parent, in the order they arrived. */
  readonly children = new Map<string, string[]>();
  /** Parents whose children have all been loaded (not only those a path revealed). */
  readonly loaded = new Set<string>();
  roots: string[] = [];
  readonly expanded = new Set<string>();
  readonly changedInside = new Set<string>();
  /** Filter: only nodes whose aggregated status is at least this. */
  minStatus = 0;

  /** Adds or refreshes nodes (a page of the tree), keeping the loaded order. */
  add(list: readonly TreeNode[]): void {
    for (const node of list) {
      const known = this.nodes.get(node.id);
      this.nodes.set(node.id, { ...known, ...node, childCount: node.childCount ?? known?.childCount ?? null });
      if (node.parentId === null) {
        if (!known) this.roots.push(node.id);
      } else {
        const siblings = this.children.get(node.parentId) ?? [];
        if (!siblings.includes(node.id)) {
          siblings.push(node.id);
          this.children.set(node.parentId, siblings);
        }
      }
    }
  }

  /** Marks a parent's children as loaded (even when there are none). */
  markLoaded(parentId: string): void {
    this.loaded.add(parentId);
    if (!this.children.has(parentId)) this.children.set(parentId, []);
  }

  isLoaded(id: string): boolean {
    return this.loaded.has(id);
  }

  /** Removes nodes gone from the server, with their loaded subtrees. */
  remove(id: string): void {
    const node = this.nodes.get(id);
    if (!node) return;
    for (const child of this.children.get(id) ?? []) this.remove(child);
    this.nodes.delete(id);
    this.children.delete(id);
    this.loaded.delete(id);
    this.expanded.delete(id);
    this.changedInside.delete(id);
    if (node.parentId === null) this.roots = this.roots.filter((root) => root !== id);
    else {
      const siblings = this.children.get(node.parentId);
      if (siblings) this.children.set(node.parentId, siblings.filter((sibling) => sibling !== id));
    }
  }

  expand(id: string): void {
    this.expanded.add(id);
    this.changedInside.delete(id);
  }

  collapse(id: string): void {
    this.expanded.delete(id);
  }

  /**
   * Applies a committed change: the node's own and aggregated status; its
   * collapsed ancestors get the "changed inside" mark. Returns whether the
   * node is loaded here (else only the marks changed).
   */
  apply(change: StatusChange): boolean {
    const node = this.nodes.get(change.id);
    if (node) {
      node.status = change.status;
      node.aggregatedStatus = change.aggregatedStatus;
    }
    const ancestors = pathIds(change.path).filter((id) => id !== change.id);
    for (const ancestor of ancestors) {
      if (this.nodes.has(ancestor) && !this.expanded.has(ancestor)) this.changedInside.add(ancestor);
    }
    // The parent's worst child may have changed; recompute from loaded children when complete.
    const parentId = node?.parentId ?? ancestors[ancestors.length - 1];
    const parent = parentId ? this.nodes.get(parentId) : undefined;
    if (parent && this.isLoaded(parent.id)) {
      const kids = (this.children.get(parent.id) ?? []).map((id) => this.nodes.get(id)).filter((kid): kid is TreeNode => !!kid);
      if (parent.childCount !== null && kids.length >= parent.childCount) {
        parent.worstChildStatus = kids.length ? Math.max(...kids.map((kid) => kid.aggregatedStatus)) : null;
      } else if (node && (parent.worstChildStatus ?? -1) < node.aggregatedStatus) {
        parent.worstChildStatus = node.aggregatedStatus;
      }
    }
    return node !== undefined;
  }

  /** Expands every loaded node whose subtree holds a problem (aggregated status ≥ `level`). */
  expandProblems(level: number): string[] {
    const opened: string[] = [];
    for (const node of this.nodes.values()) {
      const worst = node.worstChildStatus ?? -1;
      if (node.aggregatedStatus >= level && worst >= level && (node.childCount ?? 1) > 0 && !this.expanded.has(node.id)) {
        this.expand(node.id);
        opened.push(node.id);
      }
    }
    return opened;
  }

  private passes(node: TreeNode): boolean {
    return node.aggregatedStatus >= this.minStatus;
  }

  /** The visible rows, parents before children, in loaded order. */
  rows(): Row[] {
    const shown = (ids: readonly string[]) => ids.map((id) => this.nodes.get(id)).filter((node): node is TreeNode => !!node && this.passes(node));
    return flattenTree(shown(this.roots), {
      id: (node) => node.id,
      children: (node) => {
        const kids = this.children.get(node.id);
        return kids && shown(kids);
      },
      expandable: (node) => (node.childCount === null ? !this.loaded.has(node.id) || (this.children.get(node.id)?.length ?? 0) > 0 : node.childCount > 0),
      expanded: (node) => this.expanded.has(node.id),
    }).map((row) => ({ ...row, node: row.item, changedInside: this.changedInside.has(row.id) }));
  }
}
