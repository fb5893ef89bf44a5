// The web view of glassagent's invoke server: a chat whose every step shows as it streams.
//
// It posts to /api/ai/invoke with "stream": true and reads the Server-Sent Events from the
// response body (EventSource cannot POST). Everything the model, the tools or a stored chat
// wrote is put on the page as text (textContent, text nodes), never parsed as HTML.
//
// Authentication: opened as /?token=... (the address `glassagent serve` prints), the server
// trades the token for an HttpOnly, SameSite=Strict cookie and redirects here, so every
// request of this page carries the cookie without the script ever seeing the token. A token
// entered in the form instead is kept in sessionStorage and sent as a bearer token.
"use strict";

(() => {
  const API = "/api/ai";
  const TOKEN_KEY = "glassagent.token";
  const TERMINAL = new Set(["complete", "aborted", "error", "budget_exceeded", "awaiting_approval"]);
  const NEEDS_TOKEN =
    "This server needs a token: open the address glassagent serve printed (.../?token=...), " +
    "or enter a bearer token above.";
  const ROLES = new Set(["system", "user", "assistant", "tool"]);

  const state = {
    chatId: null, // the stored chat this page continues (servers with a store)
    history: null, // the chat so far, posted back each turn (servers without a store)
    store: null, // whether the server keeps chats: true, false, or null until known
    controller: null, // aborts the turn under way
  };

  const $ = (id) => document.getElementById(id);

  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try {
      return JSON.stringify(value, null, 2);
    } catch (_) {
      return String(value);
    }
  }

  function compact(value) {
    try {
      return JSON.stringify(value);
    } catch (_) {
      return String(value);
    }
  }

  // ---- exact decimal sums for costs (amounts are decimal strings) ----------------------------

  function parseDecimal(text) {
    const match = /^(-?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(String(text));
    if (!match || (match[2] + (match[3] || "")) === "") return null;
    const fraction = match[3] || "";
    let digits = BigInt(match[1] + (match[2] + fraction || "0"));
    let scale = fraction.length - Number(match[4] || 0);
    if (scale < 0) {
      digits *= 10n ** BigInt(-scale);
      scale = 0;
    }
    return { digits, scale };
  }

  function addDecimal(a, b) {
    const scale = Math.max(a.scale, b.scale);
    const widen = (x) => x.digits * 10n ** BigInt(scale - x.scale);
    return { digits: widen(a) + widen(b), scale };
  }

  function formatDecimal(x) {
    const negative = x.digits < 0n;
    let text = (negative ? -x.digits : x.digits).toString().padStart(x.scale + 1, "0");
    if (x.scale) text = text.slice(0, -x.scale) + "." + text.slice(-x.scale);
    return (negative ? "-" : "") + text;
  }

  function formatCost(amount, currency) {
    return currency === "USD" ? "$" + amount : amount + " " + currency;
  }

  function formatUsage(usage) {
    if (!usage) return "";
    let text = `${usage.input_tokens} in / ${usage.output_tokens} out tokens`;
    if (usage.thinking_tokens) text += ` (${usage.thinking_tokens} thinking)`;
    if (usage.cache_read_tokens) {
      const rate = usage.input_tokens ? Math.round((100 * usage.cache_read_tokens) / usage.input_tokens) : 0;
      text += `, ${usage.cache_read_tokens} cached (${rate}% cache hits)`;
    }
    return text;
  }

  function formatMs(ms) {
    if (typeof ms !== "number") return "";
    return ms >= 1000 ? (ms / 1000).toFixed(2) + " s" : ms.toFixed(ms < 10 ? 1 : 0) + " ms";
  }

  // ---- authentication and requests ---------------------------------------------------------

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  function api(path, options = {}) {
    const headers = Object.assign({}, options.headers);
    const bearer = token();
    if (bearer) headers.Authorization = "Bearer " + bearer;
    return fetch(API + path, Object.assign({}, options, { headers }));
  }

  async function errorOf(response) {
    try {
      const body = await response.json();
      if (body && body.error) return body.error;
    } catch (_) {
      // not JSON: fall through
    }
    return { code: "http_" + response.status, message: `The server answered ${response.status}.` };
  }

  function showNotice(text) {
    const notice = $("notice");
    notice.textContent = text;
    notice.hidden = !text;
  }

  function showTokenState() {
    const has = Boolean(token());
    $("forget-token").hidden = !has;
  }

  function askForToken(message) {
    $("token-form").hidden = false;
    $("forget-token").hidden = true;
    showNotice(message);
    $("token").focus();
  }

  // ---- the list of stored chats ------------------------------------------------------------

  async function loadChats() {
    const note = $("chats-note");
    let response;
    try {
      response = await api("/chats");
    } catch (_) {
      note.textContent = "The server cannot be reached.";
      return;
    }
    if (response.status === 401) {
      note.textContent = "";
      askForToken(NEEDS_TOKEN);
      return;
    }
    if (!response.ok) {
      const error = await errorOf(response);
      if (error.code === "no_store") {
        state.store = false;
        $("chat-list").replaceChildren();
        note.textContent = "This server keeps no chats: a chat lasts as long as this page.";
      } else {
        note.textContent = error.message;
      }
      return;
    }
    state.store = true;
    const body = await response.json();
    const items = body.chats.map((chat) => {
      const item = el("li");
      const button = el("button", "chat-link", chat.chat_id);
      button.type = "button";
      button.dataset.chatId = chat.chat_id;
      button.addEventListener("click", () => openChat(chat.chat_id));
      item.append(button);
      return item;
    });
    $("chat-list").replaceChildren(...items);
    note.textContent = items.length ? "" : "No stored chats yet.";
    markCurrentChat();
  }

  function markCurrentChat() {
    for (const button of document.querySelectorAll(".chat-link")) {
      button.classList.toggle("current", button.dataset.chatId === state.chatId);
    }
    const label = $("chat-label");
    if (state.chatId) label.textContent = "chat " + state.chatId;
    else label.textContent = state.history ? "chat kept in this page" : "new chat";
    $("show-tree").hidden = !(state.store && state.chatId);
  }

  function newChatId() {
    const now = new Date().toISOString().replace(/[-:]/g, "").replace("T", "-").slice(0, 15);
    const random = crypto.getRandomValues(new Uint8Array(3));
    return "web-" + now + "-" + Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  function newChat() {
    if (state.controller) return;
    state.chatId = null;
    state.history = null;
    $("transcript").replaceChildren();
    $("tree").hidden = true;
    showNotice("");
    markCurrentChat();
    $("message").focus();
  }

  // ---- a stored chat: its current thread and its tree --------------------------------------

  function indexDocument(doc) {
    const list = Array.isArray(doc.messages) ? doc.messages : Object.values(doc.messages || {});
    const byId = new Map();
    for (const message of list) byId.set(message.message_id || message.id, message);
    const root = list.find((m) => m.parent_id === null || m.parent_id === undefined);
    return { byId, root: root ? root.message_id || root.id : null };
  }

  function childrenOf(message) {
    return message.children || message.children_ids || [];
  }

  function threadOf(doc, byId) {
    const thread = [];
    const seen = new Set();
    let id = doc.current_node;
    while (id && byId.has(id) && !seen.has(id)) {
      seen.add(id);
      thread.push(id);
      id = byId.get(id).parent_id;
    }
    return thread.reverse();
  }

  async function fetchChat(chatId) {
    let response;
    try {
      response = await api("/chats/" + encodeURIComponent(chatId));
    } catch (_) {
      showNotice("The server cannot be reached.");
      return null;
    }
    if (response.status === 401) {
      askForToken(NEEDS_TOKEN);
      return null;
    }
    if (!response.ok) {
      showNotice((await errorOf(response)).message);
      return null;
    }
    return response.json();
  }

  async function openChat(chatId) {
    if (state.controller) return;
    const doc = await fetchChat(chatId);
    if (!doc) return;
    state.chatId = chatId;
    state.history = null;
    showNotice("");
    const { byId, root } = indexDocument(doc);
    const thread = threadOf(doc, byId);
    renderThread(thread.map((id) => byId.get(id)));
    renderTree(chatId, doc, byId, root, new Set(thread));
    markCurrentChat();
  }

  async function showTree() {
    const chatId = state.chatId;
    const doc = chatId && (await fetchChat(chatId));
    if (!doc || chatId !== state.chatId) return;
    const { byId, root } = indexDocument(doc);
    renderTree(chatId, doc, byId, root, new Set(threadOf(doc, byId)));
  }

  function renderThread(messages) {
    const transcript = $("transcript");
    transcript.replaceChildren();
    let turn = null;
    for (const message of messages) {
      const typed = message.role === "user" && !message.protocol;
      if (typed || !turn) {
        turn = new Turn(typed ? message.content : null, true);
        transcript.append(turn.root);
        if (typed) continue;
      }
      turn.addStored(message);
    }
    transcript.scrollTop = transcript.scrollHeight;
  }

  function treeNode(message, id, onThread, currentNode) {
    const role = ROLES.has(message.role) ? message.role : "other";
    const node = el("div", "node role-" + role);
    node.dataset.messageId = id;
    if (onThread.has(id)) node.classList.add("on-thread");
    const head = el("div", "node-head");
    head.append(el("span", "badge role", message.role));
    if (message.status === "aborted") head.append(el("span", "badge aborted", "aborted"));
    if (message.status === "unreadable") head.append(el("span", "badge aborted", "unreadable"));
    if (message.protocol) head.append(el("span", "badge protocol", "protocol"));
    if (id === currentNode) head.append(el("span", "badge current", "current"));
    const time = message.timestamp || message.created_at;
    if (time) {
      const when = el("span", "muted", String(time).replace(/^.*T(\d\d:\d\d:\d\d).*$/, "$1"));
      when.title = String(time);
      head.append(when);
    }
    node.append(head);
    if (message.content) node.append(el("div", "content", message.content));
    for (const call of message.tool_calls || []) {
      const line = el("div", "tool-call");
      line.append(el("span", "tool-name", call.function_name), el("code", "args", compact(call.arguments)));
      node.append(line);
    }
    if (message.role === "tool" && message.tool_call_id) {
      node.append(el("div", "muted", `result of ${message.tool_call_id}` + (message.is_error ? " (error)" : "")));
    }
    return node;
  }

  function renderTree(chatId, doc, byId, root, onThread) {
    $("tree-title").textContent = chatId;
    const body = $("tree-body");
    body.replaceChildren();
    if (!root) body.append(el("p", "muted", "The chat has no messages."));
    const seen = new Set();
    const stack = root ? [[root, body]] : [];
    while (stack.length) {
      let [id, container] = stack.pop();
      while (id && byId.has(id) && !seen.has(id)) {
        seen.add(id);
        const message = byId.get(id);
        container.append(treeNode(message, id, onThread, doc.current_node));
        const children = childrenOf(message).filter((child) => byId.has(child));
        id = children.length === 1 ? children[0] : null;
        if (children.length > 1) {
          const group = el("div", "branches");
          container.append(group);
          const frames = children.map((child, index) => {
            const branch = el("div", "branch");
            branch.append(el("div", "branch-label", `branch ${index + 1} of ${children.length}`));
            group.append(branch);
            return [child, branch];
          });
          stack.push(...frames.reverse());
        }
      }
    }
    $("tree").hidden = false;
  }

  // ---- one turn: the user's message, then each step as its events arrive -------------------

  class Turn {
    constructor(message, past) {
      this.root = el("article", past ? "turn past" : "turn");
      if (message !== null) this.root.append(el("div", "msg user", message));
      this.steps = el("ol", "steps");
      this.root.append(this.steps);
      this.call = null; // the model call under way
      this.tools = new Map(); // call id -> its tool step
      this.lastTool = null;
      this.cost = { known: true, total: null, currency: null };
      this.started = performance.now();
    }

    step(kind, title, meta) {
      const item = el("li", "step " + kind);
      const head = el("div", "step-head");
      head.append(el("span", "step-title", title));
      const metaNode = el("span", "meta", meta || "");
      head.append(metaNode);
      item.append(head);
      item.meta = metaNode;
      this.steps.append(item);
      return item;
    }

    callStep(iteration, model) {
      const item = this.step("call", "Model call " + iteration, model ? model + " · waiting" : "");
      item.model = model;
      this.call = item;
      return item;
    }

    thinking(text) {
      const call = this.call || this.callStep("", "");
      if (!call.thinking) {
        const details = el("details", "thinking");
        details.open = true;
        details.append(el("summary", null, "Thinking"));
        call.thinking = document.createTextNode("");
        const pre = el("pre");
        pre.append(call.thinking);
        details.append(pre);
        call.insertBefore(details, call.answer || null);
      }
      call.thinking.appendData(text);
    }

    text(text) {
      const call = this.call || this.callStep("", "");
      if (!call.answer) {
        call.answer = el("div", "msg assistant");
        call.answerText = document.createTextNode("");
        call.answer.append(call.answerText);
        call.append(call.answer);
      }
      call.answerText.appendData(text);
    }

    // `name` is the function the model called; `displayName` the tool's name for people
    // (`tool_name` of the events), shown first, with the function name beside it.
    toolStep(name, args, callId, known, displayName) {
      const item = this.step("tool", "Tool call ", "running");
      const title = item.querySelector(".step-title");
      if (displayName && displayName !== name) {
        title.append(el("span", "tool-name", displayName), " ", el("span", "function-name", `(${name})`));
      } else {
        title.append(el("span", "tool-name", name));
      }
      item.dataset.tool = name;
      if (callId) item.dataset.callId = callId;
      if (!known) item.append(el("div", "problem", "The agent has no tool of this name."));
      item.append(el("div", "label", "arguments"), el("pre", "args", pretty(args)));
      item.progress = el("ul", "progress");
      item.append(item.progress);
      this.tools.set(callId, item);
      this.lastTool = item;
      return item;
    }

    toolResult(callId, result, isError, durationMs) {
      const item = this.tools.get(callId) || this.toolStep("?", {}, callId, true);
      item.classList.add(isError ? "failed" : "done");
      item.meta.textContent = (isError ? "error" : "done") + (durationMs ? " · " + formatMs(durationMs) : "");
      item.append(el("div", "label", isError ? "error" : "result"), el("pre", "result", pretty(result)));
    }

    addCost(cost) {
      if (!cost || cost.amount === null || cost.amount === undefined) {
        this.cost.known = false;
        return;
      }
      const amount = parseDecimal(cost.amount);
      if (!amount || (this.cost.currency && this.cost.currency !== cost.currency)) {
        this.cost.known = false;
        return;
      }
      this.cost.currency = cost.currency;
      this.cost.total = this.cost.total ? addDecimal(this.cost.total, amount) : amount;
    }

    addStored(message) {
      if (message.role === "tool") {
        this.toolResult(message.tool_call_id, message.content, message.is_error, null);
        return;
      }
      if (message.role === "system") {
        this.steps.append(el("li", "step system", message.content));
        return;
      }
      const label = message.protocol ? "Protocol" : message.role === "assistant" ? "Answer" : message.role;
      this.call = this.step("call", label, "");
      if (message.thinking) this.thinking(message.thinking);
      if (message.content) this.text(message.content);
      if (message.status !== "completed" && message.status) this.call.meta.textContent = message.status;
      for (const call of message.tool_calls || []) {
        const item = this.toolStep(call.function_name, call.arguments, call.tool_call_id, true);
        item.meta.textContent = "";
      }
    }

    handle(event) {
      if (event.depth) {
        this.nested(event);
        return;
      }
      const handler = HANDLERS[event.type];
      if (handler) handler(this, event);
      else this.step("other", event.type, "");
    }

    // A sub-agent's run (an event with a depth above 0) shows inside the tool call that runs
    // it (its parent_call_id), as a collapsible block of its own steps: its text stays there,
    // apart from the turn's answer. A sub-agent's end closes its block, not the turn.
    lane(event) {
      this.lanes = this.lanes || new Map();
      let lane = this.lanes.get(event.run_id);
      if (lane) return lane;
      const parent = this.lanes.get(event.parent_run_id) || this;
      const call = parent.tools.get(event.parent_call_id) || parent.lastTool;
      const agent = (call && (call.agent || call.dataset.tool)) || "sub-agent";
      lane = new Turn(null, false);
      const block = el("details", "subrun");
      block.open = true;
      block.dataset.depth = String(event.depth);
      block.dataset.agent = agent;
      block.append(el("summary", "subrun-title", "↳ " + agent), lane.steps);
      (call || parent.root).append(block);
      lane.block = block;
      this.lanes.set(event.run_id, lane);
      return lane;
    }

    nested(event) {
      const lane = this.lane(event);
      if (event.type === "llm_response") this.addCost(event.cost);
      if (TERMINAL.has(event.type)) {
        const why = event.reason || event.error || "";
        const text = event.type === "complete" ? "done" : event.type + (why ? ": " + why : "");
        lane.block.append(el("div", "subrun-status " + event.type, text));
        lane.block.classList.add(event.type);
        return;
      }
      const handler = HANDLERS[event.type];
      if (handler) handler(lane, event);
      else lane.step("other", event.type, "");
    }

    finish(event) {
      const footer = el("div", "turn-status " + event.type);
      const parts = [];
      if (event.type === "complete") parts.push("complete");
      if (event.type === "aborted") parts.push("aborted: " + event.reason);
      if (event.type === "error") parts.push(`error (${event.error_type}): ${event.error}`);
      if (event.type === "budget_exceeded") parts.push("budget exceeded: " + event.reason);
      if (event.type === "awaiting_approval") parts.push("awaiting approval");
      if (event.iterations) parts.push(event.iterations + (event.iterations === 1 ? " model call" : " model calls"));
      if (event.usage) parts.push(formatUsage(event.usage));
      const total = this.cost.known && this.cost.total;
      parts.push(total ? "cost " + formatCost(formatDecimal(total), this.cost.currency) : "cost unknown");
      parts.push(formatMs(performance.now() - this.started));
      footer.textContent = parts.join(" · ");
      this.root.append(footer);
      if (event.type !== "complete" && event.text && (!this.call || !this.call.answer)) this.text(event.text);
      if (event.type === "awaiting_approval") this.root.append(approvalForm(event.approvals || event.pending || []));
    }
  }

  // A call waiting for approval: its name and arguments, Approve and Decline (with a reason).
  // Once every waiting call is answered, the answers resume the turn.
  function approvalForm(calls) {
    const list = el("ol", "approvals");
    const answers = {};
    for (const call of calls) {
      const item = el("li", "approval");
      item.dataset.call = call.id;
      item.append(el("span", "tool-name", call.name), el("pre", "args", pretty(call.arguments)));
      const reason = el("input", "reason");
      reason.placeholder = "reason (when declining)";
      const approve = el("button", "approve", "Approve");
      const decline = el("button", "decline", "Decline");
      const answer = (value) => {
        answers[call.id] = value;
        for (const node of [approve, decline, reason]) node.disabled = true;
        item.classList.add(value === true ? "approved" : "declined");
        if (Object.keys(answers).length === calls.length && !state.controller) send(null, answers);
      };
      approve.addEventListener("click", () => answer(true));
      decline.addEventListener("click", () => answer(reason.value.trim() || false));
      item.append(reason, approve, decline);
      list.append(item);
    }
    return list;
  }

  const HANDLERS = {
    llm_request(turn, event) {
      turn.callStep(event.iteration, `${event.provider} · ${event.model}`);
    },
    llm_retry(turn, event) {
      turn.step("retry", `Retry ${event.attempt}`, `in ${event.delay} s after ${event.error_type}: ${event.error}`);
    },
    output_retry(turn, event) {
      turn.step("retry", `Output retry ${event.attempt}`, `not valid output: ${(event.errors || []).join("; ")}`);
    },
    context_compacted(turn, event) {
      const summary = event.summary === null ? "" : event.new_summary ? ", summary written" : ", summary reused";
      turn.step("context", "Context compacted", `sent ${event.messages_after} of ${event.messages_before} messages (${event.tokens_before} → ${event.tokens_after} tokens${summary})`);
    },
    thinking_chunk(turn, event) {
      turn.thinking(event.text);
    },
    text_chunk(turn, event) {
      turn.text(event.text);
    },
    llm_response(turn, event) {
      const call = turn.call || turn.callStep(event.iteration, "");
      if (event.thinking && !call.thinking) turn.thinking(event.thinking);
      if (event.text && !call.answer) turn.text(event.text);
      turn.addCost(event.cost);
      const parts = [formatMs(event.latency_ms), formatUsage(event.usage)];
      if (event.cost && event.cost.amount !== null && event.cost.amount !== undefined) {
        parts.push(formatCost(event.cost.amount, event.cost.currency));
      }
      parts.push(event.stop_reason);
      call.meta.textContent = [call.model, ...parts].filter(Boolean).join(" · ");
      turn.call = null;
    },
    function_call_start(turn, event) {
      const known = event.tool_name !== null;
      const item = turn.toolStep(event.function_name, event.args, event.call_id, known, event.tool_name);
      const ui = event.ui_info;
      if (ui && typeof ui.agent === "string") item.agent = ui.agent; // an agent used as a tool
    },
    handoff(turn, event) {
      turn.step("handoff", "Handed over to " + event.to_agent, "from " + event.from_agent);
    },
    function_execution_start() {},
    tool_progress(turn, event) {
      const item = turn.tools.get(event.call_id) || turn.lastTool;
      if (item) item.progress.append(el("li", null, event.message));
    },
    function_execution_complete(turn, event) {
      const run = event.execution;
      turn.toolResult(run.call_id, run.result, run.is_error, run.duration_ms);
    },
    sending_function_response() {},
    context_selection(turn, event) {
      const item = turn.step("context", "Context tools", `${event.scores.length} scored`);
      for (const score of event.scores) {
        item.append(el("div", "muted", `${score.tool_name}: ${score.score} (${score.status})`));
      }
    },
    context_tool_complete(turn, event) {
      const item = turn.step("context", "Context tool " + event.tool_name, formatMs(event.duration_ms));
      item.append(el("pre", event.is_error ? "result problem" : "result", event.is_error ? event.error : event.output));
    },
  };

  // ---- sending a message and reading the stream --------------------------------------------

  async function* sseEvents(response) {
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block
          .split("\n")
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (data) yield JSON.parse(data);
      }
    }
  }

  function requestBody(message, approvals) {
    const body = approvals ? { approvals } : { message };
    Object.assign(body, { stream: true, append_to_history: true });
    if (state.store === true) {
      if (!state.chatId) state.chatId = newChatId();
      body.chat_id = state.chatId;
    } else if (state.history) {
      body.history = state.history;
    }
    return body;
  }

  function setBusy(busy) {
    $("send").disabled = busy;
    $("stop").disabled = !busy;
    $("new-chat").disabled = busy;
  }

  // Send a message, or (with `approvals`) the answers that resume a turn awaiting approval.
  async function send(message, approvals) {
    const transcript = $("transcript");
    const turn = new Turn(approvals ? null : message, false);
    transcript.append(turn.root);
    showNotice("");
    const controller = new AbortController();
    state.controller = controller;
    setBusy(true);
    let ended = false;
    try {
      const response = await api("/invoke", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(requestBody(message, approvals)),
        signal: controller.signal,
      });
      if (!response.ok) {
        const error = await errorOf(response);
        turn.finish({ type: "error", error: error.message, error_type: error.code });
        ended = true;
        if (response.status === 401) askForToken(NEEDS_TOKEN);
        return;
      }
      markCurrentChat();
      for await (const event of sseEvents(response)) {
        if (TERMINAL.has(event.type) && !event.depth) {
          turn.finish(event);
          ended = true;
          if (event.history) state.history = event.history;
        } else {
          turn.handle(event);
        }
        transcript.scrollTop = transcript.scrollHeight;
      }
    } catch (error) {
      if (!ended) {
        const stopped = error && error.name === "AbortError";
        turn.finish({ type: "aborted", reason: stopped ? "stopped from this page" : String(error) });
        ended = true;
      }
    } finally {
      if (!ended) turn.finish({ type: "error", error: "the stream ended early", error_type: "stream" });
      state.controller = null;
      setBusy(false);
      markCurrentChat();
      if (state.store) loadChats();
      if (state.store && !$("tree").hidden) showTree();
    }
  }

  // ---- wiring ------------------------------------------------------------------------------

  function start() {
    $("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = $("message");
      const message = input.value;
      if (!message.trim() || state.controller) return;
      input.value = "";
      send(message);
    });
    $("message").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        $("composer").requestSubmit();
      }
    });
    $("stop").addEventListener("click", () => state.controller && state.controller.abort());
    $("new-chat").addEventListener("click", newChat);
    $("refresh-chats").addEventListener("click", loadChats);
    $("show-tree").addEventListener("click", showTree);
    $("close-tree").addEventListener("click", () => ($("tree").hidden = true));
    $("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
      $("token").value = "";
      $("token-form").hidden = true;
      showNotice("");
      showTokenState();
      loadChats();
    });
    $("forget-token").addEventListener("click", () => {
      sessionStorage.removeItem(TOKEN_KEY);
      showTokenState();
      loadChats();
    });
    showTokenState();
    markCurrentChat();
    loadChats();
    $("message").focus();
  }

  start();
})();
