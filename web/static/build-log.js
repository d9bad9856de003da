// build-log.js -- the log page of a running build follows it: what the
// page's event stream (<pre data-events>, server-sent events) brings is
// appended to the log as text, never markup (the author's build code wrote
// it); it stops when the build ends. Without JavaScript the page shows the
// stored log.

const log = document.getElementById('build-log');
const url = log?.dataset.events;

function note(text) {
	let p = document.getElementById('build-log-live');
	if (!p) {
		p = document.createElement('p');
		p.id = 'build-log-live';
		p.className = 'muted';
		log.before(p);
	}
	p.textContent = text;
}

if (url && window.EventSource) {
	const stream = new EventSource(url);
	note('Following the log as the build runs.');
	stream.addEventListener('message', (e) => {
		const atEnd = window.innerHeight + window.scrollY >= document.body.scrollHeight - 4;
		log.append(document.createTextNode(e.data));
		if (atEnd)
			window.scrollTo(0, document.body.scrollHeight);
	});
	stream.addEventListener('end', (e) => {
		stream.close();
		const badge = document.querySelector('.build-status');
		if (badge && e.data) {
			badge.textContent = e.data;
			badge.dataset.status = e.data;
		}
		note(`The build ended: ${e.data}.`);
	});
	stream.addEventListener('idle', () => {
		stream.close();
		note('No new output for a while: reload the page to follow the log again.');
	});
	stream.addEventListener('error', () => {
		if (stream.readyState === EventSource.CLOSED)
			note('The log stopped following (reload the page to follow it again).');
	});
}
