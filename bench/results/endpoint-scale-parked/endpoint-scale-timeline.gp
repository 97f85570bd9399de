set terminal pngcairo size 1000,820 font 'sans,10'
set output 'endpoint-scale-timeline.png'
set multiplot layout 2,1 title 'walhook-bench endpoint-scale (first run of each)'
set grid
set key top left
set xlabel 'seconds since the load started'
set ylabel 'backlog (deliveries committed − received)'
plot 'data/endpoint-scale-2-000-endpoints-200-bad-67-500-67-2-0-s-66-hung-walhook.timeline' using 1:2 with lines lw 2 lc 1 title 'walhook, 2,000 endpoints, 200 bad (67 × 500, 67 × 2.0 s, 66 × hung)', 'data/endpoint-scale-2-000-endpoints-all-answer-at-once-control-walhook.timeline' using 1:2 with lines lw 2 lc 2 title 'walhook, 2,000 endpoints, all answer at once (control)'
set ylabel 'slot lag (MiB)'
plot 'data/endpoint-scale-2-000-endpoints-200-bad-67-500-67-2-0-s-66-hung-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 1 title 'walhook, 2,000 endpoints, 200 bad (67 × 500, 67 × 2.0 s, 66 × hung) (unconfirmed)', 'data/endpoint-scale-2-000-endpoints-200-bad-67-500-67-2-0-s-66-hung-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 1 title 'walhook, 2,000 endpoints, 200 bad (67 × 500, 67 × 2.0 s, 66 × hung) (not yet sent)', 'data/endpoint-scale-2-000-endpoints-all-answer-at-once-control-walhook.timeline' using 1:($3 >= 0 ? $3 : 1/0) with lines lw 2 lc 2 title 'walhook, 2,000 endpoints, all answer at once (control) (unconfirmed)', 'data/endpoint-scale-2-000-endpoints-all-answer-at-once-control-walhook.timeline' using 1:($5 >= 0 ? $5 : 1/0) with lines lw 1 dt 2 lc 2 title 'walhook, 2,000 endpoints, all answer at once (control) (not yet sent)'
unset multiplot
