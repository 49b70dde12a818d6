// One row of the node tree. Its props are plain values (the model mutates
// nodes in place), so `memo` re-renders only the rows whose node, place,
// selection or flash changed: a status change touches its own row and its
// ancestors', not every visible row.
import { memo } from 'preact/compat';
import { IconChevron, IconChevronDown } from '../ui/icons';
import { Status, statusLabel } from './status';

export interface TreeRowProps {
  id: string;
  positionToken: string;
  nodeClass: string;
  status: number;
  aggregatedStatus: number;
  childCount: number | null;
  worstChildStatus: number | null;
  level: number;
  position: number;
  siblings: number;
  expandable: boolean;
  expanded: boolean;
  changedInside: boolean;
  selected: boolean;
  flash: boolean;
  top: number;
  onActivate: (id: string) => void;
}

export const TreeRow = memo(function TreeRow(props: TreeRowProps) {
  const { childCount, worstChildStatus } = props;
  return (
    <div
      id={`node-${props.id}`}
      role="treeitem"
      aria-level={props.level + 1}
      aria-posinset={props.position}
      aria-setsize={props.siblings}
      aria-expanded={props.expandable ? props.expanded : undefined}
      aria-selected={props.selected}
      aria-label={`${props.positionToken}, ${props.nodeClass}, ${statusLabel(props.aggregatedStatus)}`}
      class={`tree-row${props.flash ? ' flash' : ''}`}
      style={{ transform: `translateY(${props.top}px)`, paddingLeft: `${8 + props.level * 18}px` }}
      onClick={() => props.onActivate(props.id)}
    >
      <span class="twisty" aria-hidden="true">
        {props.expandable ? props.expanded ? <IconChevronDown size={14} /> : <IconChevron size={14} /> : null}
      </span>
      <span class="label">{props.positionToken}</span>
      <span class="cls">{props.nodeClass}</span>
      <Status value={props.aggregatedStatus} prefix="aggregated" />
      {props.status !== props.aggregatedStatus && <Status value={props.status} own prefix="own" />}
      {!props.expanded && (childCount ?? 0) > 0 && (
        <span class="kids">
          {childCount} {childCount === 1 ? 'child' : 'children'}
          {worstChildStatus !== null && worstChildStatus > 0 ? `, worst ${statusLabel(worstChildStatus)}` : ''}
        </span>
      )}
      {props.changedInside && <span class="changed-inside" role="img" aria-label="changed inside" title="Something changed inside" />}
    </div>
  );
});
