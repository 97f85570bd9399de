set terminal pngcairo size 1000,820 font 'sans,10'
set output 'noisy-neighbour-timeline.png'
set multiplot layout 2,1 title 'walhook-bench noisy-neighbour (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/noisy-neighbour-with-the-slow-endpoint-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, with the slow endpoint', 'data/noisy-neighbour-with-the-slow-endpoint-polling.timeline' using 1:2 with lines lw 2 lc 2 title 'polling, with the slow endpoint', 'data/noisy-neighbour-with-the-slow-endpoint-notify.timeline' using 1:2 with lines lw 2 lc 3 title 'notify, with the slow endpoint', 'data/noisy-neighbour-without-all-answer-at-once-walhook.timeline' using 1:2 with lines lw 2 lc 4 title 'walhook, without (all answer at once)', 'data/noisy-neighbour-without-all-answer-at-once-polling.timeline' using 1:2 with lines lw 2 lc 5 title 'polling, without (all answer at once)', 'data/noisy-neighbour-without-all-answer-at-once-notify.timeline' using 1:2 with lines lw 2 lc 6 title 'notify, without (all answer at once)'
set ylabel 'slot lag (MiB)'
plot 'data/noisy-neighbour-with-the-slow-endpoint-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, with the slow endpoint (unconfirmed)', 'data/noisy-neighbour-with-the-slow-endpoint-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, with the slow endpoint (not yet sent)', 'data/noisy-neighbour-without-all-answer-at-once-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 4 title 'walhook, without (all answer at once) (unconfirmed)', 'data/noisy-neighbour-without-all-answer-at-once-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 4 title 'walhook, without (all answer at once) (not yet sent)'
unset multiplot
