// A recording pass-through HTTP proxy for the interop peers that are whole programs (the MCP
// Inspector CLI), whose JSON-RPC traffic cannot be observed from inside: it forwards every request
// to the upstream server unchanged, streams the answer back unchanged (JSON or SSE), and keeps
// each exchange's JSON-RPC messages so a check can read what the client really sent and received.
// Bearer tokens are not recorded; only the MCP routing headers are.

import http from "node:http";

const RECORDED_HEADERS = ["mcp-protocol-version", "mcp-method", "mcp-name"];
const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "upgrade", "proxy-connection"]);

/** The JSON-RPC messages in a request or response body (a message, a batch, or SSE events). */
export function messagesOf(body, contentType = "") {
  if (!body) return [];
  if (contentType.includes("text/event-stream")) {
    const messages = [];
    for (const event of body.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).replace(/^ /, ""))
        .join("\n");
      if (data.trim()) messages.push(...[JSON.parse(data)].flat());
    }
    return messages;
  }
  try {
    return [JSON.parse(body)].flat();
  } catch {
    return [];
  }
}

function recordedHeaders(headers) {
  return Object.fromEntries(RECORDED_HEADERS.filter((name) => name in headers).map((name) => [name, headers[name]]));
}

function forwardHeaders(headers, upstream) {
  const out = {};
  for (const [name, value] of Object.entries(headers)) {
    if (!HOP_BY_HOP.has(name.toLowerCase()) && name.toLowerCase() !== "host") out[name] = value;
  }
  out.host = upstream.host;
  return out;
}

/**
 * Start a tap on a free 127.0.0.1 port in front of `upstreamBase` (e.g. http://127.0.0.1:8000).
 * Resolves to { url, calls, close }: `url` is the tap's base URL, `calls()` the completed JSON-RPC
 * calls so far, oldest first, each { method, id, params, headers, result, error }.
 */
export async function startWireTap(upstreamBase) {
  const upstream = new URL(upstreamBase);
  const exchanges = [];
  const server = http.createServer((req, res) => {
    const requestChunks = [];
    req.on("data", (chunk) => requestChunks.push(chunk));
    req.on("end", () => {
      const requestBody = Buffer.concat(requestChunks);
      const outbound = http.request(
        {
          hostname: upstream.hostname,
          port: upstream.port,
          method: req.method,
          path: req.url,
          headers: forwardHeaders(req.headers, upstream),
        },
        (answer) => {
          const responseChunks = [];
          const headers = forwardHeaders(answer.headers, upstream);
          delete headers.host;
          res.writeHead(answer.statusCode ?? 502, headers);
          answer.on("data", (chunk) => {
            responseChunks.push(chunk);
            res.write(chunk);
          });
          answer.on("end", () => {
            res.end();
            exchanges.push({
              path: req.url,
              headers: recordedHeaders(req.headers),
              request: messagesOf(requestBody.toString("utf8")),
              status: answer.statusCode,
              response: messagesOf(Buffer.concat(responseChunks).toString("utf8"), answer.headers["content-type"] ?? ""),
            });
          });
          answer.on("error", () => res.destroy());
        },
      );
      outbound.on("error", (error) => {
        if (!res.headersSent) res.writeHead(502, { "Content-Type": "text/plain" });
        res.end(`wire tap: upstream error: ${error.message}`);
      });
      res.on("close", () => outbound.destroy());
      outbound.end(requestBody);
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address();

  function calls() {
    const out = [];
    for (const exchange of exchanges) {
      for (const message of exchange.request) {
        if (typeof message?.method !== "string" || message.id === undefined) continue;
        const answer = exchange.response.find((m) => m?.id === message.id && ("result" in m || "error" in m));
        out.push({
          method: message.method,
          id: message.id,
          params: message.params,
          headers: exchange.headers,
          status: exchange.status,
          result: answer?.result,
          error: answer?.error,
        });
      }
    }
    return out;
  }

  async function close() {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }

  return { url: `http://127.0.0.1:${port}`, calls, close };
}
