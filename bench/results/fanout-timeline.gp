set terminal pngcairo size 1000,820 font 'sans,10'
set output 'fanout-timeline.png'
set multiplot layout 2,1 title 'walhook-bench fanout (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/fanout-500-ev-s-10-endpoints-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, 500 ev/s × 10 endpoints', 'data/fanout-500-ev-s-10-endpoints-polling.timeline' using 1:2 with lines lw 2 lc 2 title 'polling, 500 ev/s × 10 endpoints', 'data/fanout-500-ev-s-10-endpoints-notify.timeline' using 1:2 with lines lw 2 lc 3 title 'notify, 500 ev/s × 10 endpoints'
set ylabel 'slot lag (MiB)'
plot 'data/fanout-500-ev-s-10-endpoints-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, 500 ev/s × 10 endpoints (unconfirmed)', 'data/fanout-500-ev-s-10-endpoints-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, 500 ev/s × 10 endpoints (not yet sent)'
unset multiplot
