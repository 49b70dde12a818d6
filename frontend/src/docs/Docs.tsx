// The docs browser. The docs mirror's GraphQL (tree, documents, search,
// sync runs) is not on this server's schema yet; this page says so.
import { Empty } from '../ui/states';

export function Docs() {
  return (
    <div class="page">
      <div class="page-inner">
        <h1>Docs</h1>
        <Empty title="The docs mirror is not set up on this server">
          Once Trellis mirrors your Notion or Feishu workspace, its pages are browsed and searched here.
        </Empty>
      </div>
    </div>
  );
}
