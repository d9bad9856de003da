echo a#b # c
x='$y'"multi
line"
