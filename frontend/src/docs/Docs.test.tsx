// The docs browser against mocked server answers: the tree and a folder
// opened, a document with its frontmatter, badges, sanitized body and
// backlinks, search snippets, runs; admins get "Sync now" and the doctor,
// members do not; the empty and error states.
import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { cleanup, fireEvent, render, screen } from '@testing-library/preact';
import { LocationProvider, Route, Router } from 'preact-iso';

const calls: { name: string; variables: Record<string, unknown> }[] = [];
let answers: Record<string, (variables: Record<string, unknown>) => unknown> = {};

vi.mock('../api/client', async () => {
  const actual = await vi.importActual<typeof import('../api/client')>('../api/client');
  const answer = async (doc: { toString(): string }, variables: Record<string, unknown> = {}) => {
    const name = /(?:query|mutation) (\w+)/.exec(doc.toString())?.[1] ?? '';
    calls.push({ name, variables });
    const reply = answers[name];
    if (!reply) throw new Error(`unexpected ${name}`);
    return reply(variables);
  };
  return { ...actual, query: vi.fn(answer), mutate: vi.fn(answer), subscribe: vi.fn(() => () => undefined), onReconnect: vi.fn(() => () => undefined) };
});

const { ApiError } = await import('../api/client');
const { me } = await import('../state/session');
const { Docs } = await import('./Docs');
// happy-dom's DOM does not let DOMPurify strip anything (it returns the
// input), so here we check that every HTML string goes through it with the
// right allow-list; the real stripping is DOMPurify's, checked in Chromium.
const DOMPurify = (await import('dompurify')).default;
const sanitize = vi.spyOn(DOMPurify, 'sanitize');

const SHA = `ab${'01'.repeat(31)}`;
const entry = (path: string, title: string, folder = false) => ({ path, folder, id: `id-${title}`, title, kind: folder ? 'page' : 'page', url: null, editedAt: null, status: 'active' });
const runs = {
  docSyncRuns: {
    totalCount: 1,
    pageInfo: { hasNextPage: false, endCursor: 'r1' },
    nodes: [
      {
        id: 1,
        platform: 'NOTION',
        mode: 'full',
        reason: 'first run',
        status: 'succeeded',
        startedAt: '2026-12-04T09:00:00Z',
        finishedAt: '2026-12-04T09:00:05Z',
        stats: { fetched: 2, written: 2 },
        changes: { added: ['p1', 'p2'], updated: [], moved: [], trashed: [] },
        error: null,
      },
    ],
  },
};

function page(url: string) {
  history.replaceState(null, '', url);
  return render(
    <LocationProvider>
      <Router>
        <Route path="/docs" component={Docs} />
        <Route path="/docs/:rest*" component={Docs} />
      </Router>
    </LocationProvider>,
  );
}

beforeEach(() => {
  calls.length = 0;
  me.value = { id: '2', username: 'bob', role: 'MEMBER' } as never;
  answers = {
    DocsTree: (v) =>
      v.path ? { docTree: [entry('notion/Team/Notes.md', 'Notes')] } : { docTree: [entry('notion/Team', 'Team', true), entry('notion/Readme.md', 'Readme')] },
    DocsRuns: () => runs,
    DocsSearch: () => ({
      searchDocs: { pageInfo: { hasNextPage: false, endCursor: null }, nodes: [{ id: 'p1', platform: 'NOTION', title: 'Notes', path: 'notion/Team/Notes.md', kind: 'page', url: null, rank: 1, snippet: 'the <mark>plan</mark> <img src=x onerror="alert(1)"> here' }] },
    }),
  };
});

afterEach(() => cleanup());

describe('Docs', () => {
  test('members see the tree, open a folder, search and see runs, without admin buttons', async () => {
    page('/docs');
    const tree = await screen.findByRole('tree', { name: 'Notion documents' });
    const team = screen.getByRole('treeitem', { name: /^Team/ });
    expect(team.getAttribute('aria-expanded')).toBe('false');
    expect(screen.getByRole('link', { name: 'Readme' }).getAttribute('href')).toBe('/docs/notion/Readme.md');
    fireEvent.click(team.querySelector('.twisty')!);
    expect(await screen.findByRole('link', { name: 'Notes' })).toBeTruthy();
    expect(team.getAttribute('aria-expanded')).toBe('true');
    expect(calls.find((c) => c.name === 'DocsTree' && c.variables.path === 'notion/Team')).toBeTruthy();
    expect(tree.querySelectorAll('[role="treeitem"]')).toHaveLength(3);

    expect(await screen.findByText('full')).toBeTruthy();
    expect(screen.getByText('succeeded')).toBeTruthy();
    expect(screen.getByText(/added: 2/)).toBeTruthy();
    expect(screen.getByText('1 of 1')).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Show more runs' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Sync now' })).toBeNull();
    expect(screen.queryByRole('button', { name: 'Run the doctor' })).toBeNull();

    fireEvent.input(screen.getByLabelText('Search the documents'), { target: { value: 'plan' } });
    fireEvent.submit(screen.getByRole('search'));
    const results = await screen.findByRole('list', { name: 'Search results' });
    expect(results.querySelector('mark')?.textContent).toBe('plan');
    expect(sanitize).toHaveBeenCalledWith(expect.stringContaining('<mark>plan</mark>'), { ALLOWED_TAGS: ['mark'], ALLOWED_ATTR: [] });

    fireEvent.click(screen.getByRole('button', { name: 'Feishu' }));
    expect(await screen.findByText('Readme')).toBeTruthy();
    expect(calls.some((c) => c.name === 'DocsTree' && c.variables.platform === 'FEISHU')).toBe(true);
  });

  test('the tree by keyboard: one tab stop, Right opens and enters a folder, Left leaves it, Enter opens a document', async () => {
    page('/docs');
    const team = await screen.findByRole('treeitem', { name: /^Team/ });
    const readme = screen.getByRole('treeitem', { name: /^Readme/ });
    expect(team.getAttribute('tabindex')).toBe('0');
    expect(readme.getAttribute('tabindex')).toBe('-1');
    expect(team.getAttribute('aria-level')).toBe('1');
    expect(readme.getAttribute('aria-posinset')).toBe('2');
    expect(readme.getAttribute('aria-setsize')).toBe('2');
    team.focus();
    fireEvent.keyDown(team, { key: 'ArrowRight' });
    const notes = await screen.findByRole('treeitem', { name: /^Notes/ });
    expect(team.getAttribute('aria-expanded')).toBe('true');
    expect(notes.getAttribute('aria-level')).toBe('2');
    fireEvent.keyDown(team, { key: 'ArrowRight' });
    await vi.waitFor(() => expect(document.activeElement).toBe(notes));
    expect(notes.getAttribute('tabindex')).toBe('0');
    expect(team.getAttribute('tabindex')).toBe('-1');
    fireEvent.keyDown(notes, { key: 'ArrowDown' });
    await vi.waitFor(() => expect(document.activeElement).toBe(readme));
    fireEvent.keyDown(readme, { key: 'Home' });
    await vi.waitFor(() => expect(document.activeElement).toBe(team));
    fireEvent.keyDown(team, { key: 'ArrowLeft' });
    await vi.waitFor(() => expect(team.getAttribute('aria-expanded')).toBe('false'));
    expect(screen.queryByRole('treeitem', { name: /^Notes/ })).toBeNull();
    fireEvent.keyDown(team, { key: 'r' });
    await vi.waitFor(() => expect(document.activeElement).toBe(readme));

    answers.DocsDocument = () => ({ doc: null });
    fireEvent.keyDown(readme, { key: 'Enter' });
    await vi.waitFor(() => expect(location.pathname).toBe('/docs/notion/Readme.md'));
    expect(await screen.findByText('No such document')).toBeTruthy();
  });

  test('search results and runs page with "Show more", appending the next page after the cursor', async () => {
    const hit = (n: number) => ({ id: `p${n}`, platform: 'NOTION', title: `Doc ${n}`, path: `notion/Doc ${n}.md`, kind: 'page', url: null, rank: 1, snippet: 'a <mark>plan</mark>' });
    answers.DocsSearch = (v) =>
      v.after
        ? { searchDocs: { pageInfo: { hasNextPage: false, endCursor: 'c2' }, nodes: [hit(3)] } }
        : { searchDocs: { pageInfo: { hasNextPage: true, endCursor: 'c1' }, nodes: [hit(1), hit(2)] } };
    const run = runs.docSyncRuns.nodes[0];
    answers.DocsRuns = (v) =>
      v.after
        ? { docSyncRuns: { totalCount: 2, pageInfo: { hasNextPage: false, endCursor: 'r2' }, nodes: [{ ...run, id: 2, mode: 'incremental' }] } }
        : { docSyncRuns: { totalCount: 2, pageInfo: { hasNextPage: true, endCursor: 'r1' }, nodes: [run] } };
    page('/docs');
    expect(await screen.findByText('1 of 2')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Show more runs' }));
    expect(await screen.findByText('incremental')).toBeTruthy();
    expect(screen.getByText('2 of 2')).toBeTruthy();
    expect(screen.queryByRole('button', { name: 'Show more runs' })).toBeNull();
    expect(calls.filter((c) => c.name === 'DocsRuns').map((c) => c.variables.after)).toEqual([null, 'r1']);

    fireEvent.input(screen.getByLabelText('Search the documents'), { target: { value: 'plan' } });
    fireEvent.submit(screen.getByRole('search'));
    const results = await screen.findByRole('list', { name: 'Search results' });
    expect(results.querySelectorAll('li')).toHaveLength(2);
    expect(screen.getByText('2 shown')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Show more results' }));
    await vi.waitFor(() => expect(results.querySelectorAll('li')).toHaveLength(3));
    expect([...results.querySelectorAll('a')].map((a) => a.textContent)).toEqual(['Doc 1', 'Doc 2', 'Doc 3']);
    expect(screen.queryByRole('button', { name: 'Show more results' })).toBeNull();
    expect(calls.filter((c) => c.name === 'DocsSearch').map((c) => [c.variables.query, c.variables.after])).toEqual([
      ['plan', null],
      ['plan', 'c1'],
    ]);
  });

  test('admins sync now and run the doctor', async () => {
    me.value = { id: '1', username: 'admin', role: 'ADMIN' } as never;
    answers.DocsDoctor = () => ({ docsDoctor: { ok: false, configured: true, checks: [{ code: 'N1', status: 'FAILED', message: 'token refused' }] } });
    answers.DocsSync = () => {
      throw new ApiError('sync already running', 'CONFLICT');
    };
    page('/docs');
    fireEvent.click(await screen.findByRole('button', { name: 'Run the doctor' }));
    expect(await screen.findByText('token refused')).toBeTruthy();
    expect(screen.getByText('N1')).toBeTruthy();
    fireEvent.click(screen.getByRole('button', { name: 'Sync now' }));
    expect((await screen.findByRole('alert')).textContent).toContain('sync already running');
  });

  test('a document: frontmatter, degradation badges, a sanitized body and backlinks', async () => {
    answers.DocsDocument = (v) => {
      expect(v.path).toBe('notion/Team A/Notes.md');
      return {
        doc: {
          id: 'p1',
          platform: 'NOTION',
          kind: 'page',
          title: 'Notes',
          url: 'https://www.notion.so/p1',
          editedAt: '2026-12-01T10:00:00Z',
          parent: 'team',
          path: 'notion/Team A/Notes.md',
          status: 'active',
          properties: [{ name: 'Owner', value: 'Ann' }],
          markdown: `# Head\n\nHello **world**\n\n<!-- opendoc:degraded kind=unsupported_block id=b1 -->\n\n<script>alert(1)</script><img src=x onerror="alert(1)">\n\n![chart](../../assets/ab/${SHA}.png)`,
          degradations: [{ kind: 'unsupported_block', id: 'b1' }],
          backlinks: [entry('notion/Readme.md', 'Readme')],
        },
      };
    };
    const { container } = page('/docs/notion/Team%20A/Notes.md');
    expect(await screen.findByRole('heading', { level: 1, name: 'Notes' })).toBeTruthy();
    expect(screen.getByRole('link', { name: 'https://www.notion.so/p1' }).getAttribute('rel')).toContain('noopener');
    expect(screen.getByText('Ann')).toBeTruthy();
    expect(screen.getByRole('note', { name: 'Degradations' }).textContent).toContain('unsupported block');
    const body = container.querySelector('.doc-body')!;
    expect(body.querySelector('strong')?.textContent).toBe('world');
    expect(body.querySelector('.degraded')?.textContent).toBe('Degraded: unsupported block');
    // An image from the mirror's asset pool comes from the server's asset route.
    expect(body.querySelector('img[alt="chart"]')?.getAttribute('src')).toBe(`/mirror/assets/ab/${SHA}.png`);
    expect(sanitize).toHaveBeenCalledWith(expect.stringContaining('<script>'), expect.objectContaining({ FORBID_ATTR: ['style'] }));
    expect(screen.getByRole('link', { name: 'Readme' }).getAttribute('href')).toBe('/docs/notion/Readme.md');
  });

  test('empty mirror, a missing document and an error with retry', async () => {
    answers.DocsTree = () => ({ docTree: [] });
    answers.DocsRuns = () => ({ docSyncRuns: { totalCount: 0, pageInfo: { hasNextPage: false, endCursor: null }, nodes: [] } });
    page('/docs');
    expect(await screen.findByText('The Notion mirror is empty')).toBeTruthy();
    expect(await screen.findByText('No sync has run yet.')).toBeTruthy();
    cleanup();

    answers.DocsDocument = () => ({ doc: null });
    page('/docs/notion/gone.md');
    expect(await screen.findByText('No such document')).toBeTruthy();
    cleanup();

    let fail = true;
    answers.DocsDocument = () => {
      if (fail) throw new ApiError('database is locked', 'INTERNAL');
      return { doc: null };
    };
    page('/docs/notion/x.md');
    expect((await screen.findByRole('alert')).textContent).toContain('database is locked');
    fail = false;
    fireEvent.click(screen.getByRole('button', { name: 'Try again' }));
    expect(await screen.findByText('No such document')).toBeTruthy();
  });
});
