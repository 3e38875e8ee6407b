import { useCallback, useEffect, useMemo, useState } from 'react';
import * as chats from '../services/chat';
import { humanError } from '../lib/errors';
import type { ChatSummary, Id } from '../types';
import { useNotices } from './useNotices';

/** Pinned first, then most recently updated. */
export function sortChats(list: readonly ChatSummary[]): ChatSummary[] {
  return [...list].sort((a, b) => Number(b.pinned) - Number(a.pinned) || b.updated - a.updated);
}

export function useChats() {
  const { notify } = useNotices();
  const [list, setList] = useState<ChatSummary[]>([]);

  const refresh = useCallback(async () => {
    try {
      setList(await chats.listChats());
    } catch (e) {
      notify('error', `Couldn't read your chats. ${humanError(e)}`);
    }
  }, [notify]);

  useEffect(() => {
    void refresh();
  }, [refresh]);

  // Each action reports its own failure and re-reads the list, so the sidebar never shows a
  // state the database does not have.
  const act = useCallback(
    async (what: () => Promise<unknown>) => {
      try {
        await what();
      } catch (e) {
        notify('error', humanError(e));
      }
      await refresh();
    },
    [notify, refresh],
  );

  const rename = useCallback((id: Id, title: string) => act(() => chats.renameChat(id, title)), [act]);
  const remove = useCallback((id: Id) => act(() => chats.deleteChat(id)), [act]);
  const pin = useCallback((id: Id, pinned: boolean) => act(() => chats.pinChat(id, pinned)), [act]);

  const sorted = useMemo(() => sortChats(list), [list]);
  return { chats: sorted, refresh, rename, remove, pin };
}
