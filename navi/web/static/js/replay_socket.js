// The replay WebSocket of one session (/ws/sessions/{id}/replay): recorded frames in the
// live protocol, paced by their recorded times; controlled with pause, resume, seek and
// speed messages, each answered by a replay_status frame; replay_end at the end.

import { getToken } from './auth.js';

export class ReplaySocket {
  /** onFrame(frame) for every frame; onClose(code) when the socket closes. */
  constructor(sessionId, { from = 1, speed = 1, onFrame, onClose }) {
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const params = new URLSearchParams({ from: String(from), speed: String(speed) });
    const token = getToken();
    if (token) params.set('token', token);
    this.queue = [];
    this.closed = false;
    this.ws = new WebSocket(`${scheme}://${location.host}/ws/sessions/${encodeURIComponent(sessionId)}/replay?${params}`);
    this.ws.onopen = () => {
      for (const message of this.queue.splice(0)) this.ws.send(message);
    };
    this.ws.onmessage = (event) => {
      let frame;
      try {
        frame = JSON.parse(event.data);
      } catch {
        return;
      }
      onFrame(frame);
    };
    this.ws.onclose = (event) => {
      this.closed = true;
      onClose(event.code);
    };
  }

  send(message) {
    const text = JSON.stringify(message);
    if (this.ws.readyState === WebSocket.OPEN) this.ws.send(text);
    else if (this.ws.readyState === WebSocket.CONNECTING) this.queue.push(text);
  }

  close() {
    this.closed = true;
    this.ws.onclose = null;
    this.ws.close(1000);
  }
}
