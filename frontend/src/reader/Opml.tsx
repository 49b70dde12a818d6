// OPML: import a subscription list (a task creates the feeds) and export yours.
import { useSignal } from '@preact/signals';
import { useRef } from 'preact/hooks';
import { mutate, query } from '../api/client';
import { ExportOpmlDocument, ImportOpmlDocument } from '../gql/graphql';
import { watchTask } from '../tasks/watch';
import { errorText } from '../ui/states';
import { toast } from '../ui/toast';
import { loadFeeds } from './store';

export function Opml() {
  const file = useRef<HTMLInputElement>(null);
  const busy = useSignal(false);

  async function importFile() {
    const chosen = file.current?.files?.[0];
    if (!chosen) return;
    busy.value = true;
    try {
      const text = await chosen.text();
      const task = (await mutate(ImportOpmlDocument, { opml: text })).importOpml;
      toast('Importing your subscriptions…');
      const done = await watchTask(task.id);
      await loadFeeds();
      const result = done.result as { feedsCreated?: number; skipped?: number } | null;
      const created = result?.feedsCreated ?? 0;
      toast(
        done.status === 'SUCCEEDED'
          ? `Imported: ${created} new feed${created === 1 ? '' : 's'}${result?.skipped ? `, ${result.skipped} skipped (already followed)` : ''}.`
          : `Import ${done.status.toLowerCase()}: ${done.error ?? ''}`,
      );
    } catch (error) {
      toast(`Could not import: ${errorText(error)}`);
    } finally {
      busy.value = false;
      if (file.current) file.current.value = '';
    }
  }

  async function exportFile() {
    try {
      const { exportOpml } = await query(ExportOpmlDocument, {});
      const url = URL.createObjectURL(new Blob([exportOpml], { type: 'text/x-opml' }));
      const link = document.createElement('a');
      link.href = url;
      link.download = 'trellis-subscriptions.opml';
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 1_000);
    } catch (error) {
      toast(`Could not export: ${errorText(error)}`);
    }
  }

  return (
    <>
      <label class="btn small" aria-disabled={busy.value}>
        Import OPML
        <input ref={file} type="file" accept=".opml,.xml,text/xml,text/x-opml" class="sr-only" onChange={importFile} disabled={busy.value} />
      </label>
      <button type="button" class="btn small" onClick={exportFile}>
        Export
      </button>
    </>
  );
}
