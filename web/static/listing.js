// listing.js -- the kernel listing: a changed select or checkbox applies the
// filters at once (the Filter button does the same without JavaScript).
const form = document.querySelector('form.filters');
if (form) {
	for (const el of form.querySelectorAll('select, input[type=checkbox]'))
		el.addEventListener('change', () => form.requestSubmit());
}
