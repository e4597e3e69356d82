// The console's only script: live pages (api/console/live.py). Served by the console itself.
// A timeline at the log's end (table#timeline[data-follow]) appends the rows that commit
// after it; the cluster "now" (h1#now[data-follow]) reloads its content when the log moves.
// Each follow request waits on the server (a long poll, bounded there); a failed one (a
// leader killed, the console restarting) is retried after a pause that doubles up to 15 s.
// The rows arrive as HTML the server rendered and escaped; nothing here builds markup.
"use strict";

(function () {
  const MAX_PAUSE_MS = 15000;

  function sleep(ms) {
    return new Promise(function (resolve) { setTimeout(resolve, ms); });
  }

  function status(text) {
    const live = document.getElementById("live");
    if (live) {
      live.hidden = false;
      live.textContent = text;
    }
  }

  // One follow request; null when the session is gone (sent to the login) or the request is
  // refused for good (4xx), else the response (which may be an error worth retrying).
  async function ask(url) {
    const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
    if (response.redirected || (response.status >= 400 && response.status < 500)) {
      status("· not following: " + (response.redirected ? "signed out" : "refused"));
      return null;
    }
    return response;
  }

  async function follow(first, handle) {
    let url = new URL(first, window.location.href);
    let pause = 1000;
    for (;;) {
      let response;
      try {
        response = await ask(url);
      } catch (error) {
        response = undefined; // the console did not answer: retry
      }
      if (response === null) {
        return;
      }
      if (response === undefined || !response.ok) {
        status("· reconnecting");
        await sleep(pause);
        pause = Math.min(pause * 2, MAX_PAUSE_MS);
        continue;
      }
      pause = 1000;
      const next = await handle(response, url);
      if (next === null) {
        return;
      }
      url = next;
    }
  }

  function followTimeline(table) {
    const body = table.tBodies[0];
    status("· following new entries");
    follow(table.dataset.follow, async function (response, url) {
      const html = await response.text();
      if (html.trim()) {
        body.insertAdjacentHTML("beforeend", html);
        const empty = document.getElementById("empty");
        if (empty) {
          empty.remove();
        }
      }
      status("· following new entries");
      const after = response.headers.get("X-Mlog-After");
      if (after !== null) {
        url.searchParams.set("after", after);
      }
      return url;
    });
  }

  function followCluster(heading) {
    const after = Number(new URL(heading.dataset.follow, window.location.href).searchParams.get("after"));
    follow(heading.dataset.follow, async function (response, url) {
      const answer = await response.json();
      if (answer.last <= after) {
        return url;
      }
      // The log moved: this page's content again, swapped in place (no reload), after a
      // pause that gathers a burst of writes into one refresh (each reads the whole image).
      await sleep(1000);
      const page = await fetch(window.location.href, { credentials: "same-origin", cache: "no-store" });
      if (!page.ok || page.redirected) {
        return url; // asked again after the next follow answer
      }
      const fresh = new DOMParser().parseFromString(await page.text(), "text/html");
      const main = fresh.querySelector("main");
      if (main) {
        document.querySelector("main").replaceWith(document.adoptNode(main));
        start();
      }
      return null;
    });
  }

  function start() {
    const table = document.querySelector("table#timeline[data-follow]");
    if (table) {
      followTimeline(table);
    }
    const heading = document.querySelector("h1#now[data-follow]");
    if (heading) {
      followCluster(heading);
    }
  }

  start();
}());
