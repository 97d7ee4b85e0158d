// The replay WebSocket of one session (/ws/sessions/{id}/replay): recorded frames in the
// live protocol, paced by their recorded times; controlled with pause, resume, seek and
// speed messages, each answered by a replay_status frame; replay_end at the end.
// It connects with a single-use ticket (auth.js), so messages sent before it is open wait.

import { wsTicket } from './auth.js';

export class ReplaySocket {
  /** onFrame(frame) for every frame; onClose(code) when the socket closes. */
  constructor(sessionId, { from = 1, speed = 1, onFrame, onClose }) {
    this.queue = [];
    this.closed = false;
    this.ws = null;
    this.open(sessionId, { from, speed, onFrame, onClose });
  }

  async open(sessionId, { from, speed, onFrame, onClose }) {
    let ticket;
    try {
      ticket = await wsTicket(); // null: no token given
    } catch {
      ticket = undefined; // the server cannot be reached
    }
    if (this.closed) return; // closed while the ticket was on its way
    if (!ticket) {
      this.closed = true;
      onClose(ticket === null ? 4401 : 1006);
      return;
    }
    const scheme = location.protocol === 'https:' ? 'wss' : 'ws';
    const params = new URLSearchParams({ from: String(from), speed: String(speed), ticket });
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
    if (!this.ws || this.ws.readyState === WebSocket.CONNECTING) this.queue.push(text);
    else if (this.ws.readyState === WebSocket.OPEN) this.ws.send(text);
  }

  close() {
    this.closed = true;
    if (!this.ws) return;
    this.ws.onclose = null;
    this.ws.close(1000);
  }
}
