// web_files.mjs -- the file page and refs of the web UI in Debian's chromium
// (headless), driven by playwright-core, against a real khub started by
// tests/integration/t0250-web-files.sh (which also pushed blob.dat, a binary
// file that is not LFS, with git): highlighted source with line anchors,
// JSON, TOML, Markdown, hostile HTML and SVG shown as text, binary and LFS
// cards, a folder's README, the last-commit column, a branch with '/' in its
// name written plainly, the branch/tag switcher, a private repo's file page.
// TAP out; screenshots under $ARTIFACTS.
import { chromium } from "playwright-core";
import { createHash } from "node:crypto";
import { mkdirSync } from "node:fs";
import { ok, test, done, bailOut } from "../js/tap.mjs";
import { api, must, commitFiles, signedIn } from "./web_lib.mjs";

const URL_ = process.env.KHUB_URL;
const ROOT = process.env.ROOT_TOKEN, ALICE = process.env.ALICE_TOKEN, EVE = process.env.EVE_TOKEN;
const ARTIFACTS = process.env.ARTIFACTS || "tests/web/artifacts";
mkdirSync(ARTIFACTS, { recursive: true });

const commit = (repo, files, summary, branch) => commitFiles(ROOT, repo, files, summary, branch);

const PY = "import torch\n\ndef relu(x):  # the third line\n    return torch.clamp(x, min=0.5)\n\n" +
	"NAME = \"relu\"\n" + `LONG = "${"x".repeat(300)}"\n`;
const LINE3 = "def relu(x):  # the third line";
const HTML = "<!doctype html><h1>hi</h1><script>window.__pwned = 'html'</script>\n<img src=x onerror=\"window.__pwned='img'\">\n";
const SVG = "<svg xmlns=\"http://www.w3.org/2000/svg\"><script>window.__pwned = 'svg'</script><circle r=\"4\"/></svg>\n";
const LFS = Buffer.concat([Buffer.from("LFSMARKERBYTES\0"), Buffer.alloc(2000, 7)]);
const LFS_OID = createHash("sha256").update(LFS).digest("hex");
const SHA = {};

async function publish() {
	// blob.dat is on main already (git push in the shell test)
	SHA.docs = await commit("acme/files", { "docs/README.md": "# Docs folder readme\n\nSee [the guide](guide.md).\n",
		"docs/guide.md": "# Guide\n\nSome **bold** text and `code`.\n\n| a | b |\n|---|---|\n| 1 | 2 |\n" }, "add docs");
	SHA.src = await commit("acme/files", { "src/relu.py": PY, "src/relu.cu": "__global__ void relu(float *x) { /* c */ }\n",
		"config.json": "{\"name\": \"relu\", \"version\": 2, \"ok\": true}\n",
		"pyproject.toml": "# build settings\n[project]\nname = \"relu\"\nversion = '0.1'\n" }, "python source");
	await commit("acme/files", { "page.html": HTML, "logo.svg": SVG, "README.md": "# Files root readme\n" }, "hostile markup");
	await commit("acme/files", { "weights.bin": LFS }, "weights");
	await must("POST", `/api/kernels/acme/files/branch/${encodeURIComponent("release/v1.2")}`, { token: ROOT, json: {} });
	SHA.release = await commit("acme/files", { "RELEASE.md": "# Release notes 1.2\n", "README.md": "# Release readme\n" },
		"release notes", "release/v1.2");
	await commit("acme/files", { "big.txt": "BIGMARKER\n" + "0123456789abcdef\n".repeat(40000),
		"many.txt": "MANYMARKER\n" + "x\n".repeat(25000) }, "a large text file");
	await must("POST", "/api/kernels/acme/files/tag/main", { token: ROOT, json: { tag: "v1.2.0" } });
	// a tag "release" beside the branch "release/v1.2": the longest name wins
	await must("POST", `/api/kernels/acme/files/tag/${SHA.docs}`, { token: ROOT, json: { tag: "release" } });
	await must("POST", "/api/repos/create", { token: ROOT, json: { name: "privfiles", organization: "acme", type: "kernel",
		private: true } });
	await commit("acme/privfiles", { "secret.py": "TOKEN = 'private'\n" }, "secret");
}

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
	args: ["--no-sandbox"] });
try {
	await publish();
	ok(true, "published files, a branch release/v1.2, a tag and a private repo through the API");
} catch (e) {
	bailOut(e);
}
const anon = await browser.newContext({ baseURL: URL_ });
const page = await anon.newPage();
const B = "/kernels/acme/files";

await test("a Python file: highlighted, #L3 is the third line and links to itself", async () => {
	const r = await page.goto(`${B}/blob/main/src/relu.py`);
	const got = await page.evaluate(() => {
		const code = document.querySelector("#file-code");
		const l3 = document.getElementById("L3");
		return { lang: code?.dataset.lang, tabindex: code?.getAttribute("tabindex"), label: code?.getAttribute("aria-label"),
			k: [...document.querySelectorAll("#file-code .tok-kw")].map((s) => s.textContent),
			s: document.querySelectorAll("#file-code .tok-str").length, c: document.querySelectorAll("#file-code .tok-com").length,
			n: document.querySelectorAll("#file-code .tok-num").length,
			line3: l3?.querySelector(".lc")?.textContent, href: l3?.querySelector(".ln a")?.getAttribute("href"),
			third: document.querySelectorAll("#file-code tr")[2]?.id };
	});
	const p = [];
	if (r.status() !== 200) p.push(`status ${r.status()}`);
	if (got.lang !== "python" || got.tabindex !== "0" || !got.label) p.push(`code box ${JSON.stringify(got)}`);
	if (!got.k.includes("def") || !got.k.includes("import") || !got.s || !got.c || !got.n) p.push(`tokens ${JSON.stringify(got)}`);
	if (got.line3 !== LINE3 || got.href !== "#L3" || got.third !== "L3") p.push(`L3 ${JSON.stringify(got)}`);
	return p;
});
await test("JSON and TOML files are shown highlighted", async () => {
	const p = [];
	for (const [path, lang] of [["config.json", "json"], ["pyproject.toml", "toml"]]) {
		const r = await page.goto(`${B}/blob/main/${path}`);
		const got = await page.evaluate(() => ({ lang: document.querySelector("#file-code")?.dataset.lang,
			s: document.querySelectorAll("#file-code .tok-str").length, k: document.querySelectorAll("#file-code .tok-kw").length,
			c: document.querySelectorAll("#file-code .tok-com").length }));
		if (r.status() !== 200 || got.lang !== lang || !got.s || (lang === "json" && !got.k) || (lang === "toml" && !got.c))
			p.push(`${path}: ${r.status()} ${JSON.stringify(got)}`);
	}
	return p;
});
await test("a Markdown file is rendered", async () => {
	const r = await page.goto(`${B}/blob/main/docs/guide.md`);
	const got = await page.evaluate(() => ({ h1: document.querySelector("article.readme h1")?.textContent.trim(),
		bold: document.querySelector("article.readme strong")?.textContent, table: !!document.querySelector("article.readme table"),
		code: !!document.querySelector("#file-code") }));
	return r.status() === 200 && got.h1 === "Guide" && got.bold === "bold" && got.table && !got.code ? [] :
		[`${r.status()} ${JSON.stringify(got)}`];
});
await test("HTML and SVG files with <script> are shown as escaped source; nothing of them runs", async () => {
	const p = [];
	for (const [path, text] of [["page.html", HTML], ["logo.svg", SVG]]) {
		const r = await page.goto(`${B}/blob/main/${path}`);
		await page.waitForTimeout(100);
		const got = await page.evaluate(() => ({ pwned: window.__pwned ?? null,
			text: [...document.querySelectorAll("#file-code .lc")].map((td) => td.textContent).join("\n"),
			scripts: [...document.querySelectorAll("main script, main svg, main img, main iframe, main object")].length }));
		if (r.status() !== 200 || got.pwned !== null || got.scripts !== 0 || got.text !== text.replace(/\n$/, ""))
			p.push(`${path}: ${r.status()} ${JSON.stringify(got).slice(0, 300)}`);
	}
	return p;
});
await test("binary and LFS files are cards with size (and oid), never inlined", async () => {
	const p = [];
	let r = await page.goto(`${B}/blob/main/blob.dat`);
	let card = await page.evaluate(() => ({ card: document.querySelector("#file-card")?.textContent || "",
		code: !!document.querySelector("#file-code"), html: document.querySelector("main").innerHTML }));
	if (r.status() !== 200 || !/binary/.test(card.card) || !card.card.includes("(16 bytes)") || card.code ||
	    card.html.includes("BINMARKER")) p.push(`blob.dat ${r.status()} ${JSON.stringify(card).slice(0, 300)}`);
	r = await page.goto(`${B}/blob/main/weights.bin`);
	card = await page.evaluate(() => ({ oid: document.querySelector("#file-lfs-oid")?.textContent,
		card: document.querySelector("#file-card")?.textContent || "", code: !!document.querySelector("#file-code"),
		html: document.querySelector("main").innerHTML }));
	if (r.status() !== 200 || card.oid !== `sha256:${LFS_OID}` || !card.card.includes(`(${LFS.length} bytes)`) || card.code ||
	    card.html.includes("LFSMARKER")) p.push(`weights.bin ${r.status()} ${JSON.stringify(card).slice(0, 300)}`);
	const raw = await page.getAttribute("#file-raw", "href");
	const res = await page.request.get(raw);
	if (res.status() !== 200 || (await res.body()).length !== LFS.length) p.push(`raw ${res.status()}`);
	return p;
});
await test("a folder's README is rendered under its listing; files link to /blob/, folders to /tree/", async () => {
	const r = await page.goto(`${B}/tree/main/docs`);
	const got = await page.evaluate(() => ({ h1: document.querySelector("#folder-readme h1")?.textContent.trim(),
		link: document.querySelector("#folder-readme a:not(.anchor)")?.getAttribute("href"),
		hrefs: [...document.querySelectorAll("#files tbody th a")].map((a) => a.getAttribute("href")) }));
	await page.goto(`${B}/tree/main`);
	const root = await page.evaluate(() => ({ h1: document.querySelector("#folder-readme h1")?.textContent.trim(),
		hrefs: [...document.querySelectorAll("#files tbody th a")].map((a) => a.getAttribute("href")) }));
	const p = [];
	if (r.status() !== 200 || got.h1 !== "Docs folder readme" || got.link !== `${B}/blob/main/docs/guide.md`) p.push(JSON.stringify(got));
	if (!got.hrefs.includes(`${B}/blob/main/docs/guide.md`)) p.push(`file links ${got.hrefs}`);
	if (root.h1 !== "Files root readme" || !root.hrefs.includes(`${B}/tree/main/src`)) p.push(`root ${JSON.stringify(root)}`);
	return p;
});
await test("the listing shows the last commit of each entry", async () => {
	await page.goto(`${B}/tree/main`);
	const rows = await page.$$eval("#files tbody tr", (trs) => Object.fromEntries(trs.map((tr) =>
		[tr.querySelector("th a").textContent, tr.querySelector("td.last-commit")?.textContent || ""])));
	const p = [];
	if (!rows["docs/"]?.startsWith("add docs") || !rows["docs/"].includes(SHA.docs.slice(0, 7))) p.push(`docs/ ${rows["docs/"]}`);
	if (!rows["src/"]?.startsWith("python source") || !rows["src/"].includes(SHA.src.slice(0, 7))) p.push(`src/ ${rows["src/"]}`);
	if (!rows["blob.dat"]?.startsWith("binary file by git")) p.push(`blob.dat ${rows["blob.dat"]}`);
	return p;
});
await test("a branch release/v1.2 is reachable written plainly and encoded; missing refs are 404", async () => {
	const p = [];
	for (const path of ["/tree/release/v1.2", "/tree/release%2Fv1.2", "/tree/release/v1.2/", "/commits/release/v1.2"]) {
		const r = await page.goto(`${B}${path}`);
		const text = await page.textContent("main");
		if (r.status() !== 200 || !(text.includes("RELEASE.md") || text.includes("release notes"))) p.push(`${path}: ${r.status()}`);
	}
	let r = await page.goto(`${B}/blob/release/v1.2/RELEASE.md`);
	if (r.status() !== 200 || (await page.textContent("article.readme h1")).trim() !== "Release notes 1.2") p.push(`blob ${r.status()}`);
	r = await page.goto(`${B}/blob/release%2Fv1.2/RELEASE.md`);
	if (r.status() !== 200) p.push(`blob encoded ${r.status()}`);
	for (const path of ["/tree/release/v9", "/blob/release/v9/RELEASE.md", "/blob/main/RELEASE.md", "/commits/nope"]) {
		r = await page.goto(`${B}${path}`);
		if (r.status() !== 404 || !(r.headers()["content-type"] || "").startsWith("text/html")) p.push(`${path}: ${r.status()}`);
	}
	// the tag "release" (at "add docs") is the revision when no longer name matches
	r = await page.goto(`${B}/tree/release/docs`);
	if (r.status() !== 200 || (await page.textContent("#ref-switcher summary")) !== "Tag release" ||
	    !(await page.textContent("#files")).includes("guide.md")) p.push(`tag release: ${r.status()}`);
	r = await page.goto(`${B}/tree/release/src`);
	if (r.status() !== 404) p.push(`src is not in the tag release: ${r.status()}`);
	const j = await api("GET", "/api/kernels/acme/files/tree/release%2Fv9");
	if (j.status !== 404 || !j.data?.error) p.push(`API JSON ${j.status} ${j.text.slice(0, 80)}`);
	return p;
});
await test("a ref's Files view shows that ref's README; the Files and Commits tabs stay on the ref", async () => {
	await page.goto(`${B}/tree/release/v1.2`);
	const got = await page.evaluate(() => ({ h1: document.querySelector("#folder-readme h1")?.textContent.trim(),
		tabs: [...document.querySelectorAll("nav.tabs a")].map((a) => a.getAttribute("href")) }));
	return got.h1 === "Release readme" && got.tabs.includes(`${B}/tree/release/v1.2`) && got.tabs.includes(`${B}/commits/release/v1.2`) ?
		[] : [JSON.stringify(got)];
});
await test("a text file over the preview limit (bytes or lines) is a card with its size, not inlined", async () => {
	const r = await page.goto(`${B}/blob/main/big.txt`);
	const got = await page.evaluate(() => ({ card: document.querySelector("#file-card")?.textContent || "",
		code: !!document.querySelector("#file-code"), html: document.querySelector("main").innerHTML }));
	const r2 = await page.goto(`${B}/blob/main/many.txt`);
	const many = await page.evaluate(() => ({ card: document.querySelector("#file-card")?.textContent || "",
		html: document.querySelector("main").innerHTML }));
	return r.status() === 200 && /too large/.test(got.card) && got.card.includes(`(${10 + 17 * 40000} bytes)`) && !got.code &&
		!got.html.includes("BIGMARKER") && r2.status() === 200 && /too many lines/.test(many.card) &&
		!many.html.includes("MANYMARKER") ? [] : [`${r.status()} ${got.card} ${r2.status()} ${many.card}`];
});
await test("the branch/tag switcher lists branches and tags, marks the current one, works without JavaScript", async () => {
	const ctx = await browser.newContext({ baseURL: URL_, javaScriptEnabled: false });
	const nojs = await ctx.newPage();
	const p = [];
	for (const path of ["/tree/release/v1.2", "/commits/release/v1.2", "/blob/release/v1.2/RELEASE.md"]) {
		await nojs.goto(`${B}${path}`);
		const got = await nojs.evaluate(() => ({ names: [...document.querySelectorAll("#ref-switcher li a")].map((a) => a.textContent),
			current: document.querySelector("#ref-switcher a[aria-current]")?.textContent }));
		if (!got.names.includes("main") || !got.names.includes("release/v1.2") || !got.names.includes("v1.2.0") ||
		    got.current !== "release/v1.2") p.push(`${path}: ${JSON.stringify(got)}`);
	}
	await nojs.goto(`${B}/tree/release/v1.2`);
	await nojs.click("#ref-switcher summary");
	await Promise.all([nojs.waitForURL(/\/tree\/main$/), nojs.click("#ref-switcher li a:text-is('main')")]);
	if (!(await nojs.textContent("#files")).includes("blob.dat")) p.push("switching to main did not list main");
	await ctx.close();
	return p;
});
await test("a private repo's file page: 404 signed out and for a non-member, shown to a member", async () => {
	const path = "/kernels/acme/privfiles/blob/main/secret.py";
	const r1 = await page.goto(path);
	const t1 = await page.textContent("main");
	const eve = await signedIn(browser, EVE);
	const r2 = await eve.page.goto(path);
	const alice = await signedIn(browser, ALICE);
	const r3 = await alice.page.goto(path);
	const line = await alice.page.textContent("#L1 .lc").catch(() => "");
	await eve.ctx.close();
	await alice.ctx.close();
	return r1.status() === 404 && !t1.includes("TOKEN") && r2.status() === 404 && r3.status() === 200 &&
		line === "TOKEN = 'private'" ? [] : [`anon ${r1.status()} eve ${r2.status()} alice ${r3.status()} ${line}`];
});
await test("the file page fits 1366x900 and 390x844 (no page scroll sideways; code scrolls in its own box)", async () => {
	const p = [];
	for (const [w, h] of [[1366, 900], [390, 844]]) {
		const ctx = await browser.newContext({ baseURL: URL_, viewport: { width: w, height: h } });
		const pg = await ctx.newPage();
		await pg.goto(`${B}/blob/main/src/relu.py#L3`);
		await pg.screenshot({ path: `${ARTIFACTS}/file-page-${w}.png` });
		const got = await pg.evaluate(() => ({ page: document.documentElement.scrollWidth, view: window.innerWidth,
			code: document.querySelector("#file-code").scrollWidth > document.querySelector("#file-code").clientWidth }));
		if (got.page > got.view || !got.code) p.push(`${w}: ${JSON.stringify(got)}`);
		await pg.goto(`${B}/tree/main`);
		await pg.screenshot({ path: `${ARTIFACTS}/file-tree-${w}.png` });
		const tree = await pg.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth);
		if (!tree) p.push(`${w}: the tree page scrolls sideways`);
		await ctx.close();
	}
	return p;
});

await anon.close();
await browser.close();
done();
