set terminal pngcairo size 1000,820 font 'sans,10'
set output 'amqp-timeline.png'
set multiplot layout 2,1 title 'walhook-bench amqp (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/amqp-1-000-ev-s-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, 1,000 ev/s', 'data/amqp-1-000-ev-s-polling.timeline' using 1:2 with lines lw 2 lc 2 title 'polling, 1,000 ev/s', 'data/amqp-5-000-ev-s-walhook.timeline' using 1:2 with lines lw 2 lc 3 title 'walhook, 5,000 ev/s', 'data/amqp-5-000-ev-s-polling.timeline' using 1:2 with lines lw 2 lc 4 title 'polling, 5,000 ev/s', 'data/amqp-ladder-10-rows-commit-walhook.timeline' using 1:2 with lines lw 2 lc 5 title 'walhook, ladder, 10 rows/commit', 'data/amqp-ladder-10-rows-commit-polling.timeline' using 1:2 with lines lw 2 lc 6 title 'polling, ladder, 10 rows/commit'
set ylabel 'slot lag (MiB)'
plot 'data/amqp-1-000-ev-s-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, 1,000 ev/s (unconfirmed)', 'data/amqp-1-000-ev-s-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, 1,000 ev/s (not yet sent)', 'data/amqp-5-000-ev-s-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 3 title 'walhook, 5,000 ev/s (unconfirmed)', 'data/amqp-5-000-ev-s-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 3 title 'walhook, 5,000 ev/s (not yet sent)', 'data/amqp-ladder-10-rows-commit-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 5 title 'walhook, ladder, 10 rows/commit (unconfirmed)', 'data/amqp-ladder-10-rows-commit-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 5 title 'walhook, ladder, 10 rows/commit (not yet sent)'
unset multiplot
