// Resources: the list, and the five operations as forms; each shows the
// task it returns, live, until it ends.
import { useSignal } from '@preact/signals';
import { useEffect } from 'preact/hooks';
import { mutate, query } from '../api/client';
import {
  LiveCreateResourceDocument,
  LiveDeleteResourceDocument,
  LiveResourcesDocument,
  LiveUpdateADocument,
  LiveUpdateBDocument,
  LiveUpdateCDocument,
  type LiveResourcesQuery,
} from '../gql/graphql';
import { Empty, Failed, Loading, errorText } from '../ui/states';
import { LiveTabs } from './LiveTabs';
import { TaskCard, type LiveTask } from './TaskCard';

type Resource = LiveResourcesQuery['resources']['nodes'][number];
type Operation = 'A' | 'B' | 'C' | 'delete';

const OPERATIONS: Record<Operation, { label: string; help: string }> = {
  A: { label: 'Update A', help: 'Merge a patch into attributes no position reads (q:short).' },
  B: { label: 'Update B', help: 'Merge a patch into any attributes; the resource may move (q:medium).' },
  C: { label: 'Update C', help: 'Replace the attributes wholesale (q:long).' },
  delete: { label: 'Delete', help: 'Delete; nodes left without resources go with their subtrees (q:medium).' },
};

function parseObject(text: string): Record<string, unknown> {
  const value = JSON.parse(text) as unknown;
  if (!value || typeof value !== 'object' || Array.isArray(value)) throw new Error('Write a JSON object, like {"health": 2}.');
  return value as Record<string, unknown>;
}

const newKey = () => crypto.randomUUID();

export function Resources() {
  const list = useSignal<Resource[]>([]);
  const total = useSignal(0);
  const state = useSignal<'loading' | 'ready' | Error>('loading');
  const tasks = useSignal<LiveTask[]>([]);
  const createText = useSignal('{\n  "region": "eu-west",\n  "zone": "a",\n  "cluster": "k1",\n  "namespace": "shop",\n  "service": "cart",\n  "instance": "cart-1",\n  "health": 0\n}');
  const error = useSignal<string | null>(null);
  const editing = useSignal<{ id: string; op: Operation; text: string } | null>(null);

  const load = () =>
    query(LiveResourcesDocument, { first: 200 })
      .then((data) => {
        list.value = data.resources.nodes;
        total.value = data.resources.totalCount;
        state.value = 'ready';
      })
      .catch((caught) => (state.value = caught as Error));
  useEffect(() => void load(), []);

  const track = (task: LiveTask) => {
    tasks.value = [task, ...tasks.value].slice(0, 8);
  };

  async function create(event: Event) {
    event.preventDefault();
    error.value = null;
    try {
      const data = await mutate(LiveCreateResourceDocument, { attributes: parseObject(createText.value), key: newKey() });
      track(data.createResource);
      void load();
    } catch (caught) {
      error.value = errorText(caught);
    }
  }

  async function run(event: Event) {
    event.preventDefault();
    const current = editing.value;
    if (!current) return;
    error.value = null;
    try {
      const key = newKey();
      let task: LiveTask;
      if (current.op === 'delete') task = (await mutate(LiveDeleteResourceDocument, { id: current.id, key })).deleteResource;
      else if (current.op === 'A') task = (await mutate(LiveUpdateADocument, { id: current.id, patch: parseObject(current.text), key })).updateResourceA;
      else if (current.op === 'B') task = (await mutate(LiveUpdateBDocument, { id: current.id, patch: parseObject(current.text), key })).updateResourceB;
      else task = (await mutate(LiveUpdateCDocument, { id: current.id, attributes: parseObject(current.text), key })).updateResourceC;
      track(task);
      editing.value = null;
      void load();
    } catch (caught) {
      error.value = errorText(caught);
    }
  }

  return (
    <div class="page">
      <div class="toolbar">
        <div class="grow">
          <h1>Resources</h1>
        </div>
        <LiveTabs current="resources" />
      </div>
      <div class="page-inner wide">
        {error.value && (
          <p class="alert error" role="alert">
            {error.value}
          </p>
        )}
        {tasks.value.length > 0 && (
          <section aria-label="Tasks you started">
            <h2>Your tasks</h2>
            {tasks.value.map((task) => (
              <TaskCard key={task.id} initial={task} />
            ))}
          </section>
        )}
        <form class="card" onSubmit={create}>
          <h2>Create a resource</h2>
          <div class="field">
            <label for="create-attrs">Attributes (JSON)</label>
            <textarea id="create-attrs" class="input" rows={8} value={createText.value} onInput={(event) => (createText.value = (event.target as HTMLTextAreaElement).value)} />
          </div>
          <button class="btn primary" type="submit">
            Create
          </button>
        </form>
        {editing.value && (
          <form class="card" onSubmit={run} aria-labelledby="op-title">
            <h2 id="op-title">
              {OPERATIONS[editing.value.op].label} <span class="mono">{editing.value.id.slice(0, 8)}</span>
            </h2>
            <p class="hint">{OPERATIONS[editing.value.op].help}</p>
            {editing.value.op !== 'delete' && (
              <div class="field">
                <label for="op-json">{editing.value.op === 'C' ? 'New attributes (JSON)' : 'Patch (JSON merge patch)'}</label>
                <textarea
                  id="op-json"
                  class="input"
                  rows={6}
                  value={editing.value.text}
                  onInput={(event) => (editing.value = { ...editing.value!, text: (event.target as HTMLTextAreaElement).value })}
                />
              </div>
            )}
            <div class="row">
              <button class={`btn ${editing.value.op === 'delete' ? 'danger' : 'primary'}`} type="submit">
                {OPERATIONS[editing.value.op].label}
              </button>
              <button class="btn" type="button" onClick={() => (editing.value = null)}>
                Cancel
              </button>
            </div>
          </form>
        )}
        <h2>
          All resources <span class="badge">{total.value}</span>
        </h2>
        {state.value === 'loading' ? (
          <Loading />
        ) : state.value instanceof Error ? (
          <Failed error={state.value} retry={load} />
        ) : !list.value.length ? (
          <Empty title="No resources yet">Create one above; its nodes appear on the tree.</Empty>
        ) : (
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Attributes</th>
                <th scope="col">Version</th>
                <th scope="col">Actions</th>
              </tr>
            </thead>
            <tbody>
              {list.value.map((resource) => (
                <tr key={resource.id}>
                  <td class="mono">{resource.id.slice(0, 8)}</td>
                  <td>
                    <code class="mono">{JSON.stringify(resource.attributes)}</code>
                    {resource.deleting && <span class="badge">deleting</span>}
                  </td>
                  <td>{resource.version}</td>
                  <td>
                    <div class="row">
                      {(['A', 'B', 'C', 'delete'] as Operation[]).map((op) => (
                        <button
                          key={op}
                          type="button"
                          class={`btn small${op === 'delete' ? ' danger' : ''}`}
                          aria-label={`${OPERATIONS[op].label} resource ${resource.id.slice(0, 8)}`}
                          onClick={() =>
                            (editing.value = {
                              id: resource.id,
                              op,
                              text: op === 'C' ? JSON.stringify(resource.attributes, null, 2) : '{\n  "health": 2\n}',
                            })
                          }
                        >
                          {OPERATIONS[op].label}
                        </button>
                      ))}
                    </div>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </div>
    </div>
  );
}
