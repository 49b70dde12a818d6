import { describe, expect, test } from 'vitest';
import { TreeModel, pathIds, type TreeNode } from './tree';

function node(id: string, parentId: string | null, aggregatedStatus = 0, childCount: number | null = 0): TreeNode {
  const path = parentId ? `/${parentId}/${id}/` : `/${id}/`;
  return { id, parentId, class: 'c', positionToken: id, path, depth: parentId ? 1 : 0, status: aggregatedStatus, aggregatedStatus, childCount, worstChildStatus: null };
}

/** A root `r` with children a (ok), b (failing, with child b1), c (degraded). */
function sample(): TreeModel {
  const tree = new TreeModel();
  tree.add([{ ...node('r', null, 2, 3), worstChildStatus: 2 }]);
  tree.add([node('a', 'r', 0, 0), { ...node('b', 'r', 2, 1), worstChildStatus: 2 }, node('c', 'r', 1, 0)]);
  tree.markLoaded('r');
  tree.add([{ ...node('b1', 'b', 2, 0), path: '/r/b/b1/' }]);
  tree.markLoaded('b');
  return tree;
}

const ids = (tree: TreeModel) => tree.rows().map((row) => row.node.id);

describe('tree model', () => {
  test('collapsed nodes hide their children; expanding shows them in loaded order', () => {
    const tree = sample();
    expect(ids(tree)).toEqual(['r']);
    tree.expand('r');
    expect(ids(tree)).toEqual(['r', 'a', 'b', 'c']);
    tree.expand('b');
    expect(ids(tree)).toEqual(['r', 'a', 'b', 'b1', 'c']);
    const rows = tree.rows();
    expect(rows.map((row) => row.level)).toEqual([0, 1, 1, 2, 1]);
    expect(rows[2]).toMatchObject({ position: 2, siblings: 3, expandable: true, expanded: true });
    expect(rows[1]).toMatchObject({ expandable: false });
  });

  test('a status change updates in place and never reorders', () => {
    const tree = sample();
    tree.expand('r');
    expect(tree.apply({ id: 'a', path: '/r/a/', status: 3, aggregatedStatus: 3 })).toBe(true);
    expect(ids(tree)).toEqual(['r', 'a', 'b', 'c']);
    expect(tree.nodes.get('a')?.aggregatedStatus).toBe(3);
    // The parent's worst child follows, since all its children are loaded.
    expect(tree.nodes.get('r')?.worstChildStatus).toBe(3);
    tree.apply({ id: 'a', path: '/r/a/', status: 0, aggregatedStatus: 0 });
    expect(tree.nodes.get('r')?.worstChildStatus).toBe(2);
  });

  test('changes below a collapsed node mark it until it is opened', () => {
    const tree = sample();
    tree.expand('r');
    tree.apply({ id: 'b1', path: '/r/b/b1/', status: 0, aggregatedStatus: 0 });
    expect(tree.rows().find((row) => row.node.id === 'b')?.changedInside).toBe(true);
    // `r` is open, so it is not marked.
    expect(tree.rows().find((row) => row.node.id === 'r')?.changedInside).toBe(false);
    tree.expand('b');
    expect(tree.rows().find((row) => row.node.id === 'b')?.changedInside).toBe(false);
    // A change to a node not loaded here still marks its loaded ancestors.
    tree.collapse('r');
    expect(tree.apply({ id: 'zz', path: '/r/c/zz/', status: 1, aggregatedStatus: 1 })).toBe(false);
    expect(tree.rows()[0].changedInside).toBe(true);
  });

  test('the filter hides healthy branches; problems-only opens the bad ones', () => {
    const tree = sample();
    tree.minStatus = 1;
    const opened = tree.expandProblems(1);
    expect(opened.sort()).toEqual(['b', 'r']);
    expect(ids(tree)).toEqual(['r', 'b', 'b1', 'c']);
    tree.minStatus = 2;
    expect(ids(tree)).toEqual(['r', 'b', 'b1']);
  });

  test('removing a node drops its loaded subtree', () => {
    const tree = sample();
    tree.expand('r');
    tree.expand('b');
    tree.remove('b');
    expect(ids(tree)).toEqual(['r', 'a', 'c']);
    expect(tree.nodes.has('b1')).toBe(false);
  });

  test('unknown child counts stay expandable until loaded empty', () => {
    const tree = new TreeModel();
    tree.add([node('x', null, 0, null)]);
    expect(tree.rows()[0].expandable).toBe(true);
    tree.markLoaded('x');
    expect(tree.rows()[0].expandable).toBe(false);
  });

  test('a child revealed by its path does not make its parent loaded', () => {
    const tree = new TreeModel();
    tree.add([node('p', null, 0, 2)]);
    tree.add([node('c2', 'p', 0, 0)]);
    expect(tree.isLoaded('p')).toBe(false);
    tree.add([node('c1', 'p', 0, 0)]);
    tree.markLoaded('p');
    expect(tree.isLoaded('p')).toBe(true);
    tree.expand('p');
    expect(ids(tree)).toEqual(['p', 'c2', 'c1']);
  });

  test('paths name ancestors root first', () => {
    expect(pathIds('/1/42/7/')).toEqual(['1', '42', '7']);
    expect(pathIds('')).toEqual([]);
  });
});
