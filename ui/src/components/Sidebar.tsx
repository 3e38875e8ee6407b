import { forwardRef, useEffect, useState } from 'react';
import * as chatService from '../services/chat';
import { humanError } from '../lib/errors';
import { useNotices } from '../hooks/useNotices';
import type { ChatSummary, Id, SearchHit } from '../types';
import { ChatListItem } from './ChatListItem';
import { SearchResults } from './SearchResults';

interface Props {
  chats: ChatSummary[];
  activeId: Id | null;
  onNewChat: () => void;
  onOpen: (id: Id) => void;
  onOpenHit: (hit: SearchHit) => void;
  onRename: (id: Id, title: string) => void;
  onDelete: (id: Id) => void;
  onPin: (id: Id, pinned: boolean) => void;
  onSettings: () => void;
  settingsOpen: boolean;
}

const SEARCH_DELAY_MS = 200;

export const Sidebar = forwardRef<HTMLInputElement, Props>(function Sidebar(props, searchRef) {
  const { notify } = useNotices();
  const [query, setQuery] = useState('');
  const [hits, setHits] = useState<SearchHit[] | null>(null);

  // Debounced full-text search; a newer query makes older answers irrelevant.
  useEffect(() => {
    const q = query.trim();
    if (!q) {
      setHits(null);
      return;
    }
    let live = true;
    setHits(null);
    const t = setTimeout(() => {
      chatService.searchChats(q).then(
        (found) => live && setHits(found),
        (e) => {
          if (!live) return;
          setHits([]);
          notify('error', `Search failed. ${humanError(e)}`);
        },
      );
    }, SEARCH_DELAY_MS);
    return () => {
      live = false;
      clearTimeout(t);
    };
  }, [query, notify]);

  return (
    <aside className="sidebar" aria-label="Chats">
      <div className="sidebar-top">
        <button type="button" className="primary-button new-chat" data-testid="new-chat-button" onClick={props.onNewChat} title="New chat (Ctrl+N)">
          + New chat
        </button>
        <div role="search" className="search-box">
          <input
            ref={searchRef}
            type="search"
            data-testid="search-input"
            aria-label="Search chats"
            placeholder="Search chats (Ctrl+K)"
            value={query}
            onChange={(e) => setQuery(e.target.value)}
            onKeyDown={(e) => {
              if (e.key === 'Escape' && query) {
                e.stopPropagation();
                setQuery('');
              }
            }}
          />
        </div>
      </div>

      <nav className="chat-nav" aria-label={query.trim() ? 'Search results' : 'Chat history'}>
        {query.trim() ? (
          <SearchResults query={query.trim()} hits={hits} onOpen={props.onOpenHit} />
        ) : props.chats.length === 0 ? (
          <p className="muted empty-chats">No chats yet.</p>
        ) : (
          <ul className="chat-list">
            {props.chats.map((c) => (
              <ChatListItem
                key={String(c.id)}
                chat={c}
                active={props.activeId !== null && String(props.activeId) === String(c.id)}
                onOpen={() => props.onOpen(c.id)}
                onRename={(t) => props.onRename(c.id, t)}
                onDelete={() => props.onDelete(c.id)}
                onPin={(p) => props.onPin(c.id, p)}
              />
            ))}
          </ul>
        )}
      </nav>

      <div className="sidebar-bottom">
        <button type="button" className="small-button" aria-pressed={props.settingsOpen} onClick={props.onSettings}>
          ⚙ Settings
        </button>
      </div>
    </aside>
  );
});
