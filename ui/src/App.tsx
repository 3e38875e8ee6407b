import { useCallback, useEffect, useRef, useState } from 'react';
import { ChatView } from './components/ChatView';
import { Notices } from './components/Notices';
import { SettingsPage } from './components/SettingsPage';
import { Sidebar } from './components/Sidebar';
import { useChats } from './hooks/useChats';
import { useChatSession } from './hooks/useChatSession';
import { useModels } from './hooks/useModels';
import { NoticeProvider, useNotices } from './hooks/useNotices';
import { listenForGgufDrops, type DropState } from './lib/dragdrop';
import { humanError } from './lib/errors';
import { isModKey } from './lib/keys';
import { problemOf } from './lib/problems';
import { applyAppearance } from './lib/theme';
import * as settingsService from './services/settings';
import type { Id, SearchHit, Settings } from './types';

export default function App() {
  return (
    <NoticeProvider>
      <Shell />
    </NoticeProvider>
  );
}

function Shell() {
  const { notify } = useNotices();
  const models = useModels();
  const chats = useChats();
  const [settings, setSettings] = useState<Settings | null>(null);
  const [view, setView] = useState<'chat' | 'settings'>('chat');
  const [activeId, setActiveId] = useState<Id | null>(null);
  const [highlight, setHighlight] = useState<Id | null>(null);
  const [thinking, setThinking] = useState(false);
  const [drop, setDrop] = useState<DropState>('none');
  const searchRef = useRef<HTMLInputElement>(null);
  const composerRef = useRef<HTMLTextAreaElement>(null);

  const session = useChatSession(activeId, highlight, {
    onChanged: () => void chats.refresh(),
    onCreated: (id) => setActiveId(id),
  });

  useEffect(() => {
    settingsService.getSettings().then(
      (s) => {
        setSettings(s);
        applyAppearance(s);
      },
      (e) => notify('error', `Couldn't read settings. ${humanError(e)}`),
    );
  }, [notify]);

  const importPaths = models.importPaths;
  useEffect(() => {
    let stop: (() => void) | null = null;
    let live = true;
    void listenForGgufDrops((paths) => void importPaths(paths), setDrop).then((un) => {
      if (live) stop = un;
      else un();
    });
    return () => {
      live = false;
      stop?.();
    };
  }, [importPaths]);

  const openChat = useCallback((id: Id | null) => {
    setHighlight(null);
    setActiveId(id);
    setView('chat');
  }, []);

  const newChat = useCallback(() => {
    openChat(null);
    // Focus after the view has switched back to the chat.
    setTimeout(() => composerRef.current?.focus(), 0);
  }, [openChat]);

  const openHit = useCallback((hit: SearchHit) => {
    setActiveId(hit.chat_id);
    setHighlight(hit.message_id);
    setView('chat');
  }, []);

  const stop = session.stop;
  const streaming = session.stream !== null;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      if (isModKey(e, 'k')) {
        e.preventDefault();
        searchRef.current?.focus();
        searchRef.current?.select();
      } else if (isModKey(e, 'n')) {
        e.preventDefault();
        newChat();
      } else if (e.key === 'Escape' && streaming && !e.defaultPrevented) {
        e.preventDefault();
        void stop();
      }
    };
    window.addEventListener('keydown', onKey);
    return () => window.removeEventListener('keydown', onKey);
  }, [newChat, stop, streaming]);

  /** The model a message goes to: the loaded one, else the chat's or the default, loaded now. */
  const ensureModel = async (): Promise<string | null> => {
    if (models.current) return models.current.name;
    const wanted = session.chat?.model ?? settings?.default_model ?? null;
    const entry = wanted ? models.models.find((m) => m.name === wanted && problemOf(m) === null) : undefined;
    if (entry) return (await models.load(entry.name))?.name ?? null;
    notify('error', 'Choose a model first: open the model menu at the top of the window.');
    return null;
  };

  const send = async (text: string) => {
    const model = await ensureModel();
    if (!model) return false;
    setHighlight(null);
    const thinkingOn = thinking && (models.current?.capabilities.includes('thinking') ?? false);
    return session.send(text, thinkingOn, model);
  };

  const loadModel = async (name: string) => {
    // A reply streaming from the old model is stopped before the switch.
    if (session.stream) await session.stop();
    await models.load(name);
  };

  const removeChat = async (id: Id) => {
    if (activeId !== null && String(activeId) === String(id)) openChat(null);
    await chats.remove(id);
  };

  return (
    <div className="app">
      <Sidebar
        ref={searchRef}
        chats={chats.chats}
        activeId={activeId}
        onNewChat={newChat}
        onOpen={openChat}
        onOpenHit={openHit}
        onRename={(id, title) => void chats.rename(id, title).then(() => session.reload())}
        onDelete={(id) => void removeChat(id)}
        onPin={(id, pinned) => void chats.pin(id, pinned)}
        onSettings={() => setView(view === 'settings' ? 'chat' : 'settings')}
        settingsOpen={view === 'settings'}
      />
      <main className="main">
        <Notices />
        {view === 'settings' && settings ? (
          <SettingsPage
            models={models.models}
            settings={settings}
            onSaved={setSettings}
            onImported={() => void chats.refresh()}
            onClose={() => setView('chat')}
          />
        ) : (
          <ChatView
            ref={composerRef}
            session={session}
            models={models}
            highlight={highlight}
            thinking={thinking}
            onThinkingChange={setThinking}
            onSend={send}
            onLoadModel={(name) => void loadModel(name)}
          />
        )}
      </main>
      {drop === 'hover' && (
        <div className="drop-overlay" aria-live="polite">
          Drop a .gguf file to add it to your models
        </div>
      )}
    </div>
  );
}
