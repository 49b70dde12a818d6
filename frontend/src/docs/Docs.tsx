// The docs browser (`/docs`, `/docs/<mirror path>`): the mirrored tree per
// platform, a document with its frontmatter, body, degradations and
// backlinks; search with snippets; the sync runs; for admins "sync now"
// with live progress and the doctor. Everything comes from the docs
// mirror's GraphQL.
import { useSignal } from '@preact/signals';
import { useEffect, useMemo } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { mutate, query, subscribe } from '../api/client';
import {
  DocsDoctorDocument,
  DocsDocumentDocument,
  DocsRunsDocument,
  DocsSearchDocument,
  DocsSyncDocument,
  DocsSyncProgressDocument,
  type DocsDoctorQuery,
  type DocsDocumentQuery,
  type DocsRunsQuery,
  type DocsSearchQuery,
  type DocsSyncProgressSubscription,
} from '../gql/graphql';
import { me } from '../state/session';
import { watchTask } from '../tasks/watch';
import { PagesFoot, usePages } from '../ui/paging';
import { Empty, errorText, Failed, Loading } from '../ui/states';
import { When } from '../ui/when';
import { DocTree } from './DocTree';
import { PLATFORM_NAME, PLATFORMS, countKinds, docHref, kindLabel, pathFromRest, platformOfPath, statRows, type Platform } from './paths';
import { renderMarkdown, renderSnippet } from './render';

type Doc = NonNullable<DocsDocumentQuery['doc']>;
type Hit = DocsSearchQuery['searchDocs']['nodes'][number];
type Run = DocsRunsQuery['docSyncRuns']['nodes'][number];
type Doctor = DocsDoctorQuery['docsDoctor'];
type Progress = DocsSyncProgressSubscription['docsSyncProgress'];

function Field({ name, children }: { name: string; children: preact.ComponentChildren }) {
  return (
    <>
      <dt>{name}</dt>
      <dd>{children}</dd>
    </>
  );
}

/** One document: its frontmatter, degradations, body and backlinks. */
function DocView({ path }: { path: string }) {
  const doc = useSignal<Doc | null | undefined>(undefined);
  const error = useSignal<unknown>(null);
  const load = () =>
    query(DocsDocumentDocument, { path })
      .then((data) => {
        doc.value = data.doc ?? null;
        error.value = null;
      })
      .catch((caught) => (error.value = caught));
  useEffect(() => {
    doc.value = undefined;
    void load();
  }, [path]);

  // Parsed and sanitized once per body, not on every render.
  const markdown = doc.value?.markdown;
  const body = useMemo(() => (markdown === null || markdown === undefined ? null : renderMarkdown(markdown, doc.value!.path)), [markdown, doc.value?.path]);

  if (error.value) return <Failed error={error.value} retry={load} />;
  if (doc.value === undefined) return <Loading label="Loading the document…" />;
  if (doc.value === null) return <Empty title="No such document">Nothing in the mirror lies at {path}.</Empty>;
  const d = doc.value;
  const kinds = countKinds(d.degradations);
  return (
    <article class="doc" aria-labelledby="doc-title">
      <p>
        <a href="/docs">All documents</a>
      </p>
      <h1 id="doc-title">{d.title || '(untitled)'}</h1>
      <dl class="kv">
        <Field name="Platform">{d.platform ? PLATFORM_NAME[d.platform as Platform] : '—'}</Field>
        <Field name="Type">{d.kind}</Field>
        <Field name="Online">
          {d.url ? (
            <a href={d.url} target="_blank" rel="noopener noreferrer">
              {d.url}
            </a>
          ) : (
            '—'
          )}
        </Field>
        <Field name="Edited">
          <When at={d.editedAt} />
        </Field>
        <Field name="Parent">{d.parent ?? '— (at the root)'}</Field>
        <Field name="File">
          <span class="mono">{d.path}</span>
        </Field>
        {d.status !== 'active' && <Field name="Status">{d.status}</Field>}
        {d.properties.map((property) => (
          <Field key={property.name} name={property.name}>
            {property.value}
          </Field>
        ))}
      </dl>
      {kinds.length > 0 && (
        <div class="alert info" role="note" aria-label="Degradations">
          <strong>Some blocks could not be mirrored faithfully:</strong>{' '}
          {kinds.map(({ kind, count }) => (
            <span key={kind} class="degraded">
              {kindLabel(kind)}
              {count > 1 ? ` ×${count}` : ''}
            </span>
          ))}
        </div>
      )}
      {body === null ? (
        <p class="hint">This entry has no body (a folder, or a file missing on disk).</p>
      ) : (
        <div class="content doc-body" dangerouslySetInnerHTML={{ __html: body }} />
      )}
      <section aria-labelledby="backlinks">
        <h2 id="backlinks">Backlinks</h2>
        {d.backlinks.length === 0 ? (
          <p class="hint">No document links here.</p>
        ) : (
          <ul>
            {d.backlinks.map((entry) => (
              <li key={entry.path}>
                <a href={docHref(entry.path)}>{entry.title}</a>
              </li>
            ))}
          </ul>
        )}
      </section>
    </article>
  );
}

const PAGE = 20;

function Search() {
  const text = useSignal('');
  const busy = useSignal(false);
  const hits = usePages<Hit>(async (after) => (await query(DocsSearchDocument, { query: text.value, first: PAGE, after })).searchDocs);
  const found = hits.pages.value;
  return (
    <section aria-labelledby="docs-search" class="card">
      <h2 id="docs-search">Search</h2>
      <form
        role="search"
        class="row"
        onSubmit={async (event) => {
          event.preventDefault();
          text.value = String(new FormData(event.currentTarget as HTMLFormElement).get('q') ?? '').trim();
          if (!text.value) return;
          busy.value = true;
          hits.clear();
          await hits.load();
          busy.value = false;
        }}
      >
        <label class="sr-only" for="docs-q">
          Search the documents
        </label>
        <input id="docs-q" name="q" class="input grow" type="search" placeholder="Search the documents" />
        <button class="btn" type="submit" disabled={busy.value}>
          Search
        </button>
      </form>
      {hits.error.value ? (
        <p class="alert error" role="alert">
          {errorText(hits.error.value)}
        </p>
      ) : busy.value ? (
        <Loading label="Searching…" />
      ) : found && found.nodes.length === 0 ? (
        <p role="status">No document matches.</p>
      ) : found ? (
        <>
          <ol class="doc-hits" aria-label="Search results">
            {found.nodes.map((hit) => (
              <li key={hit.id}>
                <a href={docHref(hit.path)}>{hit.title || '(untitled)'}</a>{' '}
                <span class="badge">{hit.platform ? PLATFORM_NAME[hit.platform as Platform] : hit.kind}</span>
                <p class="snippet" dangerouslySetInnerHTML={{ __html: renderSnippet(hit.snippet) }} />
              </li>
            ))}
          </ol>
          <PagesFoot list={hits} label="Show more results" />
        </>
      ) : null}
    </section>
  );
}

function Changes({ run }: { run: Run }) {
  const groups = (['added', 'updated', 'moved', 'trashed'] as const).filter((key) => run.changes[key].length > 0);
  if (groups.length === 0) return <span class="hint">No changes.</span>;
  return (
    <ul class="plain">
      {groups.map((key) => (
        <li key={key}>
          {key}: {run.changes[key].length}
          <span class="sr-only"> ({run.changes[key].join(', ')})</span>
        </li>
      ))}
    </ul>
  );
}

function Runs({ generation }: { generation: number }) {
  const list = usePages<Run>(async (after) => (await query(DocsRunsDocument, { first: PAGE, after })).docSyncRuns);
  const load = list.load;
  useEffect(() => void load(), [generation]);
  const runs = list.pages.value?.nodes;
  const error = list.error;
  return (
    <section aria-labelledby="docs-runs" class="card">
      <h2 id="docs-runs">Sync runs</h2>
      {error.value ? (
        <Failed error={error.value} retry={load} />
      ) : !runs ? (
        <Loading label="Loading the runs…" />
      ) : runs.length === 0 ? (
        <p class="hint">No sync has run yet.</p>
      ) : (
        <>
          <div class="table-scroll">
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Started</th>
                <th scope="col">Platform</th>
                <th scope="col">Mode</th>
                <th scope="col">Status</th>
                <th scope="col">Stats</th>
                <th scope="col">Changes</th>
              </tr>
            </thead>
            <tbody>
              {runs.map((run) => (
                <tr key={run.id}>
                  <td>
                    <When at={run.startedAt} />
                  </td>
                  <td>{run.platform ? PLATFORM_NAME[run.platform as Platform] : '—'}</td>
                  <td title={run.reason}>{run.mode}</td>
                  <td>
                    <span class="run-status" data-status={run.status}>
                      {run.status}
                    </span>
                    {run.error && <div class="hint">{run.error}</div>}
                  </td>
                  <td>
                    <details>
                      <summary>Stats</summary>
                      <dl class="kv">
                        {statRows(run.stats).map((row) => (
                          <Field key={row.name} name={row.name}>
                            {row.value}
                          </Field>
                        ))}
                      </dl>
                    </details>
                  </td>
                  <td>
                    <Changes run={run} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
          </div>
          <PagesFoot list={list} label="Show more runs" />
        </>
      )}
    </section>
  );
}

const PHASE: Record<string, string> = {
  LISTING: 'Listing',
  DATABASES: 'Querying databases',
  DOCUMENTS: 'Writing documents',
  DELETES: 'Detecting deletes',
  LINKS: 'Rewriting links',
  FINISHED: 'Finished',
};

function Admin({ onSynced }: { onSynced: () => void }) {
  const progress = useSignal<Record<string, Progress>>({});
  const running = useSignal(false);
  const message = useSignal<{ ok?: string; error?: string }>({});
  const doctor = useSignal<Doctor | null>(null);
  const checking = useSignal(false);

  useEffect(
    () =>
      subscribe(DocsSyncProgressDocument, {}, (data) => {
        const step = data.docsSyncProgress;
        progress.value = { ...progress.value, [step.platform]: step };
      }),
    [],
  );

  return (
    <section aria-labelledby="docs-admin" class="card">
      <h2 id="docs-admin">Sync and doctor</h2>
      <div class="row">
        <button
          type="button"
          class="btn primary"
          disabled={running.value}
          onClick={async () => {
            running.value = true;
            message.value = {};
            progress.value = {};
            try {
              const task = (await mutate(DocsSyncDocument, {})).syncDocs;
              const end = await watchTask(task.id);
              message.value = end.status === 'SUCCEEDED' ? { ok: 'The sync finished.' } : { error: `The sync ended: ${end.status.toLowerCase()}${end.error ? ` (${end.error})` : ''}.` };
              onSynced();
            } catch (caught) {
              message.value = { error: errorText(caught) };
            } finally {
              running.value = false;
            }
          }}
        >
          {running.value ? 'Syncing…' : 'Sync now'}
        </button>
        <button
          type="button"
          class="btn"
          disabled={checking.value}
          onClick={async () => {
            checking.value = true;
            try {
              doctor.value = (await query(DocsDoctorDocument, {})).docsDoctor;
            } catch (caught) {
              message.value = { error: errorText(caught) };
            } finally {
              checking.value = false;
            }
          }}
        >
          {checking.value ? 'Checking…' : 'Run the doctor'}
        </button>
      </div>
      {message.value.error && (
        <p class="alert error" role="alert">
          {message.value.error}
        </p>
      )}
      {message.value.ok && (
        <p class="alert ok" role="status">
          {message.value.ok}
        </p>
      )}
      {Object.values(progress.value).length > 0 && (
        <ul class="plain sync-progress" aria-label="Sync progress" aria-live="polite">
          {Object.values(progress.value).map((step) => (
            <li key={step.platform}>
              <strong>{PLATFORM_NAME[step.platform as Platform]}</strong>: {PHASE[step.phase] ?? step.phase}
              {step.total > 0 ? `, ${step.done} of ${step.total} documents` : ''}, {step.requests} requests
              {step.waits ? `, ${step.waits} waits` : ''}
              {step.errors ? `, ${step.errors} errors` : ''}
              {step.failed ? ' — failed' : ''}
              {step.total > 0 && (
                <progress max={step.total} value={step.done} aria-label={`${PLATFORM_NAME[step.platform as Platform]} documents`} />
              )}
            </li>
          ))}
        </ul>
      )}
      {doctor.value && (
        <div class="doctor">
          <p role="status">
            {doctor.value.ok ? 'No check failed.' : 'Some checks failed.'}
            {doctor.value.configured ? '' : ' No platform has credentials.'}
          </p>
          <table class="grid">
            <thead>
              <tr>
                <th scope="col">Code</th>
                <th scope="col">Status</th>
                <th scope="col">Message</th>
              </tr>
            </thead>
            <tbody>
              {doctor.value.checks.map((check) => (
                <tr key={check.code}>
                  <td class="mono">{check.code}</td>
                  <td>
                    <span class="run-status" data-status={check.status.toLowerCase()}>
                      {check.status.toLowerCase()}
                    </span>
                  </td>
                  <td>{check.message}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

export function Docs() {
  const { params } = useRoute();
  const path = pathFromRest(params.rest);
  const platform = useSignal<Platform>(platformOfPath(path) ?? 'NOTION');
  const generation = useSignal(0);
  const admin = me.value?.role === 'ADMIN';

  if (path) {
    return (
      <div class="page">
        <div class="page-inner docs">
          <DocView path={path} />
        </div>
      </div>
    );
  }

  return (
    <div class="page">
      <div class="page-inner docs">
        <h1>Docs</h1>
        <Search />
        <section aria-labelledby="docs-tree" class="card">
          <h2 id="docs-tree">Mirrored documents</h2>
          <div class="tabs" role="group" aria-label="Platform">
            {PLATFORMS.map((each) => (
              <button
                key={each}
                type="button"
                aria-pressed={platform.value === each}
                onClick={() => (platform.value = each)}
              >
                {PLATFORM_NAME[each]}
              </button>
            ))}
          </div>
          <DocTree key={`${platform.value}-${generation.value}`} platform={platform.value} label={`${PLATFORM_NAME[platform.value]} documents`} />
        </section>
        {admin && <Admin onSynced={() => (generation.value += 1)} />}
        <Runs generation={generation.value} />
      </div>
    </div>
  );
}
