// The viewer runs on the project's own client package, @opencode-bridge/client (clients/typescript/; its
// browser build is committed as bridge-client.js and checked by `make test`): the connection
// (BridgeSocket: token, resume, reconnects, commands), the session's state (SessionState) and the REST
// routes (BridgeClient). The viewer's scripts are loaded after it, in order.
import * as bridgeLib from "./bridge-client.js";

window.bridgeLib = bridgeLib;
for (const name of ["viewer.js", "composer.js", "questions.js"]) {
  const s = document.createElement("script");
  s.src = "/static/" + name;
  s.async = false; // run in this order
  document.body.appendChild(s);
}
