set terminal pngcairo size 1000,820 font 'sans,10'
set output 'nats-timeline.png'
set multiplot layout 2,1 title 'walhook-bench nats (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/nats-1-000-ev-s-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, 1,000 ev/s', 'data/nats-5-000-ev-s-walhook.timeline' using 1:2 with lines lw 2 lc 2 title 'walhook, 5,000 ev/s'
set ylabel 'slot lag (MiB)'
plot 'data/nats-1-000-ev-s-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, 1,000 ev/s (unconfirmed)', 'data/nats-1-000-ev-s-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, 1,000 ev/s (not yet sent)', 'data/nats-5-000-ev-s-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 2 title 'walhook, 5,000 ev/s (unconfirmed)', 'data/nats-5-000-ev-s-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 2 title 'walhook, 5,000 ev/s (not yet sent)'
unset multiplot
