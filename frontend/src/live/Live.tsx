// The live dashboard: the node tree as a WAI-ARIA tree in a virtual list,
// expanded lazily (roots plus two levels first), statuses by colour, icon
// and label, changes flashing in place through `nodeStatusChanged`, a
// filter that opens bad branches, and a refetch after a reconnect.
import { batch, useSignal } from '@preact/signals';
import { useLocation, useRoute } from 'preact-iso';
import { useEffect, useMemo, useReducer, useRef } from 'preact/hooks';
import { ApiError, connection, onReconnect, query, subscribe } from '../api/client';
import { LiveChildrenDocument, LiveNodeDocument, LiveStatusDocument, LiveTreeDocument, type LiveNodeQuery, type TreeNodeFieldsFragment } from '../gql/graphql';
import { useVirtualList } from '../ui/virtual';
import { oncePerFrame } from '../ui/frame';
import { Empty, Failed, Loading } from '../ui/states';
import { Status, statusScale } from './status';
import { TreeModel, pathIds, type Row, type TreeNode } from './tree';
import { TreeRow } from './TreeRow';
import { treeKey } from '../ui/treenav';
import { LiveTabs } from './LiveTabs';

const ROW = 34;
const CHILD_PAGE = 500;

function toNode(node: TreeNodeFieldsFragment): TreeNode {
  return {
    id: node.id,
    parentId: node.parentId ?? null,
    class: node.class,
    positionToken: node.positionToken,
    path: node.path,
    depth: node.depth,
    status: node.status,
    aggregatedStatus: node.aggregatedStatus,
    childCount: node.childCount,
    worstChildStatus: node.worstChildStatus ?? null,
  };
}

export function Live() {
  const { route } = useLocation();
  const { params } = useRoute();
  const model = useMemo(() => new TreeModel(), []);
  const [version, bump] = useReducer((n: number) => n + 1, 0);
  const state = useSignal<'loading' | 'ready' | ApiError>('loading');
  const focusId = useSignal<string | null>(params.id ?? null);
  const problemsOnly = useSignal(false);
  const minStatus = useSignal(0);
  const search = useSignal('');
  const flashing = useRef(new Map<string, number>());
  const scrollRef = useRef<HTMLDivElement>(null);
  const details = useSignal<LiveNodeQuery['node'] | null>(null);
  /** Bumped when a change reaches the selected node: its details are read again. */
  const detailsStale = useSignal(0);

  async function loadRoots() {
    const data = await query(LiveTreeDocument, { depth: 2, first: 5000 });
    statusScale.value = data.nodeConfig.statusScale;
    model.add(data.nodeTree.map(toNode));
    // Every node shallower than the deepest level loaded has all its children.
    for (const node of data.nodeTree) if (node.depth < 2) model.markLoaded(node.id);
    // Roots start open: the first screen shows two levels.
    for (const root of model.roots) if (!model.expanded.has(root)) model.expanded.add(root);
  }

  async function loadChildren(id: string, after?: string) {
    const data = await query(LiveChildrenDocument, {
      id,
      first: CHILD_PAGE,
      after: after ?? null,
      // All of them: the filter hides rows here, so a loaded list is complete.
      min: null,
      order: 'WORST_FIRST',
    });
    if (!data.node) {
      model.remove(id);
      return;
    }
    model.add(data.node.children.map(toNode));
    model.markLoaded(id);
  }

  async function expand(id: string) {
    if (!model.isLoaded(id)) await loadChildren(id);
    model.expand(id);
    bump(undefined);
  }

  async function reveal(id: string) {
    const data = await query(LiveNodeDocument, { id });
    if (!data.node) return false;
    model.add([...data.node.ancestors.map(toNode), toNode(data.node)]);
    for (const ancestor of data.node.ancestors) await expand(ancestor.id);
    focusId.value = id;
    bump(undefined);
    return true;
  }

  async function refetchVisible() {
    try {
      await loadRoots();
      for (const id of [...model.expanded]) if (model.nodes.has(id) && model.nodes.get(id)!.depth >= 1) await loadChildren(id);
      detailsStale.value += 1;
      bump(undefined);
    } catch {
      // The next reconnect tries again.
    }
  }

  useEffect(() => {
    let live = true;
    let detailsTouched = false;
    const redraw = oncePerFrame(() => {
      if (problemsOnly.peek()) model.expandProblems(Math.max(1, minStatus.peek()));
      batch(() => {
        if (detailsTouched) detailsStale.value += 1;
        detailsTouched = false;
        bump(undefined);
      });
    });
    loadRoots()
      .then(async () => {
        if (params.id) await reveal(params.id);
        if (live) state.value = 'ready';
        bump(undefined);
      })
      .catch((error) => {
        if (live) state.value = error as ApiError;
      });
    const stop = subscribe(
      LiveStatusDocument,
      {},
      (data) => {
        const change = data.nodeStatusChanged;
        model.apply({ id: change.id, path: change.path, status: change.status, aggregatedStatus: change.aggregatedStatus });
        flashing.current.set(change.id, performance.now());
        if (focusId.peek() !== null && pathIds(change.path).includes(focusId.peek()!)) detailsTouched = true;
        // Changes arrive by the thousand a second under load: the model takes
        // each at once, the tree is drawn once per frame.
        redraw.schedule();
      },
      (error) => {
        if (error.code === 'EVENTS_LAGGED') void refetchVisible();
      },
    );
    const stopReconnect = onReconnect(() => void refetchVisible());
    return () => {
      live = false;
      redraw.cancel();
      stop();
      stopReconnect();
    };
  }, []);

  // Flashes end after their animation; nothing re-renders only for that.
  useEffect(() => {
    const timer = setInterval(() => {
      const now = performance.now();
      let changed = false;
      for (const [id, at] of flashing.current) {
        if (now - at > 1_200) {
          flashing.current.delete(id);
          changed = true;
        }
      }
      if (changed) bump(undefined);
    }, 600);
    return () => clearInterval(timer);
  }, []);

  model.minStatus = minStatus.value;
  const needle = search.value.trim().toLowerCase();
  const rows: Row[] = useMemo(() => {
    const all = model.rows();
    return needle ? all.filter((row) => row.node.positionToken.toLowerCase().includes(needle) || row.node.class.toLowerCase().includes(needle)) : all;
  }, [version, minStatus.value, needle]);
  const virtual = useVirtualList({ count: rows.length, rowHeight: ROW, scrollRef: scrollRef as never, overscan: 12 });
  const focusIndex = rows.findIndex((row) => row.node.id === focusId.value);

  useEffect(() => {
    if (focusIndex >= 0) virtual.scrollToIndex(focusIndex);
  }, [focusIndex]);

  // The selected node's details: properties, resources, ancestors.
  useEffect(() => {
    const id = focusId.value;
    if (!id) {
      details.value = null;
      return;
    }
    let live = true;
    const timer = setTimeout(() => {
      query(LiveNodeDocument, { id })
        .then((data) => {
          if (live) details.value = data.node ?? null;
        })
        .catch(() => undefined);
    }, 80);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [focusId.value, detailsStale.value]);

  function select(id: string) {
    focusId.value = id;
    route(`/live/node/${id}`, true);
  }

  // A click selects the row and opens or closes it; one function for the
  // page's life, so the rows' `memo` holds.
  const activate = useRef<(id: string) => Promise<void>>(async () => undefined);
  activate.current = async (id: string) => {
    select(id);
    const row = rows.find((candidate) => candidate.node.id === id);
    if (row?.expandable) {
      if (row.expanded) model.collapse(id);
      else await expand(id);
      bump(undefined);
    }
  };
  const onActivate = useMemo(() => (id: string) => void activate.current(id), []);

  async function onKey(event: KeyboardEvent) {
    const action = treeKey(rows, focusIndex < 0 ? 0 : focusIndex, event);
    if (!action) return;
    event.preventDefault();
    const row = rows.find((each) => each.id === action.id);
    switch (action.type) {
      case 'focus':
        return select(action.id);
      case 'expand':
        return expand(action.id);
      case 'collapse':
        model.collapse(action.id);
        return bump(undefined);
      case 'activate':
        if (row?.expandable) {
          if (row.expanded) model.collapse(row.id);
          else await expand(row.id);
          bump(undefined);
        }
    }
  }

  async function applyFilter(level: number, problems: boolean) {
    minStatus.value = level;
    problemsOnly.value = problems;
    if (problems) {
      // Open every bad branch, loading the children it hides.
      const threshold = Math.max(1, level);
      for (let round = 0; round < 8; round += 1) {
        const pending = [...model.nodes.values()].filter(
          (node) => node.aggregatedStatus >= threshold && (node.worstChildStatus ?? -1) >= threshold && !model.isLoaded(node.id),
        );
        for (const node of pending.slice(0, 50)) await loadChildren(node.id);
        model.expandProblems(threshold);
        if (!pending.length) break;
      }
    }
    bump(undefined);
  }

  async function onSearch(event: Event) {
    event.preventDefault();
    const text = search.value.trim();
    if (/^\d+$/.test(text)) {
      search.value = '';
      await reveal(text);
    }
  }

  const s = state.value;
  const now = performance.now();
  return (
    <div class="live">
      <section class="tree-wrap" aria-label="Node tree">
        <div class="toolbar">
          <div class="grow">
            <h1>Live dashboard</h1>
          </div>
          <LiveTabs current="tree" />
        </div>
        <div class="toolbar">
          <label class="sr-only" for="tree-min">
            Show nodes with status at least
          </label>
          <select id="tree-min" class="input" style={{ width: 'auto' }} value={String(minStatus.value)} onChange={(event) => void applyFilter(Number((event.target as HTMLSelectElement).value), problemsOnly.value)}>
            {statusScale.value.map((level) => (
              <option key={level.value} value={String(level.value)}>
                {level.value === statusScale.value[0]?.value ? 'All statuses' : `${level.label} or worse`}
              </option>
            ))}
          </select>
          <button
            type="button"
            class="btn small"
            aria-pressed={problemsOnly.value}
            onClick={() => void applyFilter(problemsOnly.value ? 0 : Math.max(1, minStatus.value), !problemsOnly.value)}
          >
            Problems only
          </button>
          <form class="search-box" role="search" onSubmit={onSearch}>
            <label class="sr-only" for="tree-search">
              Find a node (name, class or id)
            </label>
            <input id="tree-search" class="input" type="search" placeholder="Find a node: name, class or id" value={search.value} onInput={(event) => (search.value = (event.target as HTMLInputElement).value)} />
          </form>
          <span class="conn" data-state={connection.value} role="img" aria-label={`Live updates: ${connection.value}`} title={`Live updates: ${connection.value}`} />
        </div>
        {s === 'loading' ? (
          <Loading label="Loading the tree…" />
        ) : s instanceof Error ? (
          <Failed error={s} retry={() => location.reload()} />
        ) : !rows.length ? (
          <Empty title={model.nodes.size ? 'Nothing matches' : 'No nodes yet'}>
            {model.nodes.size ? 'Loosen the filter or the search.' : <>Create resources in <a href="/live/resources">Resources</a>; the tree follows.</>}
          </Empty>
        ) : (
          <div
            class="tree"
            ref={scrollRef}
            role="tree"
            aria-label="Nodes"
            tabIndex={0}
            aria-activedescendant={focusId.value && focusIndex >= 0 ? `node-${focusId.value}` : undefined}
            onKeyDown={(event) => void onKey(event)}
          >
            <div style={{ height: `${virtual.totalSize}px`, position: 'relative' }}>
              {virtual.rows.map((item) => {
                const row = rows[item.index];
                if (!row) return null;
                const { node } = row;
                return (
                  <TreeRow
                    key={node.id}
                    id={node.id}
                    positionToken={node.positionToken}
                    nodeClass={node.class}
                    status={node.status}
                    aggregatedStatus={node.aggregatedStatus}
                    childCount={node.childCount}
                    worstChildStatus={node.worstChildStatus}
                    level={row.level}
                    position={row.position}
                    siblings={row.siblings}
                    expandable={row.expandable}
                    expanded={row.expanded}
                    changedInside={row.changedInside}
                    selected={node.id === focusId.value}
                    flash={(flashing.current.get(node.id) ?? -Infinity) > now - 1_200}
                    top={item.start}
                    onActivate={onActivate}
                  />
                );
              })}
            </div>
          </div>
        )}
      </section>
      <aside class="side-panel" aria-label="Selected node">
        <NodeDetails node={details.value} onReveal={(id) => void reveal(id)} />
      </aside>
    </div>
  );
}

function NodeDetails({ node, onReveal }: { node: LiveNodeQuery['node'] | null; onReveal: (id: string) => void }) {
  if (!node) {
    return (
      <section>
        <h2>Node</h2>
        <p class="hint">Select a node to see its properties and resources. Arrow keys move; Right opens, Left closes.</p>
      </section>
    );
  }
  return (
    <>
      <section>
        <h2>{node.positionToken}</h2>
        <nav aria-label="Path" class="hint">
          {node.ancestors.map((ancestor) => (
            <span key={ancestor.id}>
              <a href={`/live/node/${ancestor.id}`} onClick={(event) => (event.preventDefault(), onReveal(ancestor.id))}>
                {ancestor.positionToken}
              </a>{' '}
              /{' '}
            </span>
          ))}
          {node.positionToken}
        </nav>
        <dl class="kv">
          <dt>Class</dt>
          <dd>{node.class}</dd>
          <dt>Aggregated</dt>
          <dd>
            <Status value={node.aggregatedStatus} />
          </dd>
          <dt>Own status</dt>
          <dd>
            <Status value={node.status} own />
          </dd>
          <dt>Children</dt>
          <dd>{node.childCount}</dd>
          <dt>Id</dt>
          <dd class="mono">{node.id}</dd>
          <dt>Updated</dt>
          <dd>{new Date(node.updatedAt).toLocaleString()}</dd>
        </dl>
      </section>
      <section>
        <h2>Properties</h2>
        <pre class="json">{JSON.stringify(node.properties, null, 2)}</pre>
      </section>
      <section>
        <h2>Resources</h2>
        {node.resources.length ? (
          <ul class="plain">
            {node.resources.map((resource) => (
              <li key={resource.id}>
                <span class="mono">{resource.id.slice(0, 8)}</span> v{resource.version}
              </li>
            ))}
          </ul>
        ) : (
          <p class="hint">None mapped directly.</p>
        )}
      </section>
    </>
  );
}


