import { forwardRef, useCallback, useState } from 'react';
import * as chatService from '../services/chat';
import { EXPORT_EXT, safeFilename } from '../lib/download';
import { humanError } from '../lib/errors';
import { useNotices } from '../hooks/useNotices';
import type { ChatSession } from '../hooks/useChatSession';
import type { ModelsState } from '../hooks/useModels';
import type { ExportFormat, GenerationStats, Id, Message } from '../types';
import { ChatSettings } from './ChatSettings';
import { Composer } from './Composer';
import { MessageList } from './MessageList';
import { ModelPicker } from './ModelPicker';
import { StatsBar } from './StatsBar';

interface Props {
  session: ChatSession;
  models: ModelsState;
  highlight: Id | null;
  thinking: boolean;
  onThinkingChange: (on: boolean) => void;
  onSend: (text: string) => Promise<boolean>;
  onLoadModel: (name: string) => void;
}

export const ChatView = forwardRef<HTMLTextAreaElement, Props>(function ChatView(props, composerRef) {
  const { session, models, highlight } = props;
  const { notify } = useNotices();
  const [settingsOpen, setSettingsOpen] = useState(false);
  const { chat, stream } = session;
  const canThink = models.current?.capabilities.includes('thinking') ?? false;
  const streaming = stream !== null && chat !== null && String(stream.chatId) === String(chat.id);

  const exportChat = async (format: ExportFormat) => {
    if (!chat) return;
    try {
      const text = await chatService.exportChat(chat.id, format);
      const saved = await chatService.saveTextFile(safeFilename(chat.title, EXPORT_EXT[format]), text);
      if (saved) notify('info', `Saved to ${saved}`);
    } catch (e) {
      notify('error', `Export failed. ${humanError(e)}`);
    }
  };

  const thinkingOn = props.thinking && canThink;
  const modelName = models.current?.name ?? null;
  const { regenerate, edit } = session;
  const onRegenerate = useCallback(
    (m: Message) => void regenerate(m, thinkingOn, modelName),
    [regenerate, thinkingOn, modelName],
  );
  const onEdit = useCallback(
    (m: Message, text: string) => void edit(m, text, thinkingOn, modelName),
    [edit, thinkingOn, modelName],
  );

  // Between streams, show the figures stored with the last reply on the path.
  const stats = session.stats ?? statsOf(session.path, models.current?.context_length ?? 0);

  return (
    <div className="chat-view">
      <header className="toolbar">
        <ModelPicker
          models={models.models}
          current={models.current}
          loading={models.loading}
          onOpen={() => void models.refresh()}
          onLoad={props.onLoadModel}
          onUnload={() => void models.unload()}
          onImport={() => void models.pickAndImport()}
          onForget={(name) => void models.forget(name)}
        />
        <button
          type="button"
          className="toggle-button"
          aria-pressed={props.thinking && canThink}
          disabled={!canThink}
          title={canThink ? 'Let the model think before it answers' : 'The loaded model has no thinking mode'}
          onClick={() => props.onThinkingChange(!props.thinking)}
        >
          Thinking
        </button>
        <div className="toolbar-spacer" />
        {chat && <h1 className="chat-heading">{chat.title || 'New chat'}</h1>}
        <div className="toolbar-spacer" />
        <button
          type="button"
          className="small-button"
          aria-expanded={settingsOpen}
          disabled={!chat}
          onClick={() => setSettingsOpen(!settingsOpen)}
        >
          Chat settings
        </button>
        <button type="button" className="small-button" aria-label="Export chat as Markdown" disabled={!chat} onClick={() => void exportChat('markdown')}>
          Export .md
        </button>
        <button type="button" className="small-button" aria-label="Export chat as JSON" disabled={!chat} onClick={() => void exportChat('json')}>
          Export .json
        </button>
      </header>

      <div className="chat-body">
        <div className="conversation">
          {session.path.length === 0 ? (
            <div className="empty-chat">
              <h2>{models.current ? `Chat with ${models.current.name}` : 'Pick a model to start'}</h2>
              <p className="muted">
                Enter sends, Shift+Enter adds a line, Esc stops a reply. Ctrl+K searches your chats, Ctrl+N starts a new one.
                Drop a .gguf file on the window to import it.
              </p>
            </div>
          ) : (
            <MessageList
              tree={session.tree}
              path={session.path}
              streamingId={streaming ? stream.assistantId : null}
              busy={stream !== null}
              highlight={highlight}
              onShowBranch={session.showBranch}
              onRegenerate={onRegenerate}
              onEdit={onEdit}
            />
          )}
          <StatsBar stats={stats} streaming={streaming} />
          <Composer
            ref={composerRef}
            streaming={stream !== null}
            stopping={stream?.stopping ?? false}
            disabled={models.loading !== null}
            placeholder={models.loading ? 'Loading the model…' : 'Message (Enter to send, Shift+Enter for a new line)'}
            onSend={props.onSend}
            onStop={() => void session.stop()}
          />
        </div>
        {settingsOpen && chat && (
          <ChatSettings
            key={String(chat.id)}
            chat={chat}
            onClose={() => setSettingsOpen(false)}
            onSave={async (systemPrompt, sampling) => {
              try {
                await chatService.updateChatSettings(chat.id, systemPrompt, sampling);
                await session.reload();
                notify('info', 'Chat settings saved.');
              } catch (e) {
                notify('error', `Couldn't save chat settings. ${humanError(e)}`);
              }
            }}
          />
        )}
      </div>
    </div>
  );
});

function statsOf(path: Message[], contextMax: number): GenerationStats | null {
  const last = [...path].reverse().find((m) => m.role === 'assistant');
  if (!last || last.tok_s === null || last.prompt_tokens === null || last.reply_tokens === null) return null;
  return {
    prompt_tokens: last.prompt_tokens,
    reply_tokens: last.reply_tokens,
    tok_s: last.tok_s,
    context_used: last.prompt_tokens + last.reply_tokens,
    context_max: contextMax,
  };
}
